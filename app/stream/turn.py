"""The event stream of one turn: ordering, settlement, coalescing and the memory bound (docs/api.md §5–§6).

A `Turn` sits between the producer (the dispatcher, feeding adapter events) and one consumer (the SSE
writer or `/v1/complete`). It is the only place that

- assigns `contentIndex` and keeps blocks from interleaving,
- builds the `AssistantMessage` from the events it lets through (so `*_end.content` is by construction the
  concatenation of the block's deltas, and tool arguments are by construction the parsed deltas),
- settles exactly once: the first terminal outcome wins, everything after it is dropped and counted,
- merges deltas inside the coalescing window (leading edge: the first delta of a window goes at once),
- bounds what waits for a slow reader: pending deltas merge, and past `max_pending_bytes` the producer is
  made to wait, which stops it reading the upstream socket (TCP back-pressure).

All mutation happens on the event loop thread; nothing here awaits except the two waiting points.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Callable

import orjson

from app.catalog import Pricing
from app.stream.text import SurrogateJoiner, valid_text
from app.stream.usage import new_usage, priced_usage

_BLOCK_KINDS = {"text_start": "text", "thinking_start": "thinking", "toolcall_start": "toolCall"}
# The block type each delta and end event belongs to.
_BLOCK_OF = {
    "text_delta": "text", "thinking_delta": "thinking", "toolcall_delta": "toolCall",
    "text_end": "text", "thinking_end": "thinking", "toolcall_end": "toolCall",
}
_EVENT_OVERHEAD = 64  # bytes charged to the memory bound for any queued event besides its text


class ContractViolation(RuntimeError):
    """An adapter produced events out of order. A bug of ours, reported as an internal error."""


ARGUMENTS_CUT_OFF = "arguments were cut off by the token limit (stop reason length)"


class ToolArgumentsError(Exception):
    """A tool call's streamed arguments did not parse as one JSON object, or the token limit cut them off."""

    def __init__(self, call_id: str, name: str, problem: str) -> None:
        super().__init__(f"tool call {call_id} ({name}): {problem}")
        self.call_id = call_id
        self.name = name
        self.problem = problem

    def cut_off(self) -> "ToolArgumentsError":
        """The same call, failed because the message ended at the token limit inside its arguments."""
        return ToolArgumentsError(self.call_id, self.name, ARGUMENTS_CUT_OFF)


class _PendingDelta:
    """A delta waiting to be sent; later deltas of the same block append to it instead of queueing."""

    __slots__ = ("type", "index", "parts", "size")

    def __init__(self, type_: str, index: int, text: str) -> None:
        self.type = type_
        self.index = index
        self.parts = [text]
        self.size = len(text)

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def event(self) -> dict[str, Any]:
        return {"type": self.type, "contentIndex": self.index, "delta": "".join(self.parts)}


class Turn:
    def __init__(
        self,
        request_id: str,
        *,
        throttle_ms: int = 50,
        max_pending_bytes: int = 256 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request_id = request_id
        self.message: dict[str, Any] = {
            "role": "assistant",
            "content": [],
            "provider": None,
            "api": None,
            "model": None,
            "usage": new_usage(),
            "stopReason": None,
            "timestamp": int(time.time() * 1000),
            "requestId": request_id,
        }
        self.pricing: Pricing | None = None
        self._throttle = throttle_ms / 1000.0
        self._max_pending = max_pending_bytes
        self._clock = clock

        # Output side.
        self._ready: deque[dict[str, Any] | _PendingDelta] = deque()
        self._held: _PendingDelta | None = None
        self._held_until = 0.0
        self._window_key: tuple[str, int] | None = None
        self._window_end = 0.0
        self._pending_bytes = 0
        self._wakeup = asyncio.Event()
        self._drained = asyncio.Event()
        self._closed = False  # settled: nothing more will be queued
        self._reader = True  # False once the reader is gone (or never wanted events, as /v1/complete)

        # Block state.
        self._open: dict[str, Any] | None = None
        self._open_parts: list[str] = []  # the open block's recent deltas
        self._open_chunks: list[str] = []  # …and its earlier ones, joined 256 at a time
        self._joiner = SurrogateJoiner()  # the open block's deltas as valid text (emoji cut between events)

        # Settlement and counters.
        self.started = False
        self.settled = False
        self.terminal: dict[str, Any] | None = None
        self.outcome: str | None = None  # done | error | aborted
        self.tool_calls = 0
        self.late_frames = 0
        self.events_sent = 0
        self.first_content_at: float | None = None
        self.created_at = clock()

    # ----------------------------------------------------------------- producer side

    def prepare(self, provider: str, api: str, model: str, pricing: Pricing | None) -> None:
        """Name the provider and model of the next attempt. Nothing is sent until its first content event."""
        if self.started or self.settled:
            raise ContractViolation("a committed turn cannot change provider")
        self.pricing = pricing
        self.message.update(provider=provider, api=api, model=model, usage=new_usage())

    def _commit(self) -> None:
        """The first content event: send `start` naming the provider and model that serve this turn."""
        self.started = True
        m = self.message
        self._enqueue({"type": "start", "requestId": self.request_id, "provider": m["provider"], "api": m["api"], "model": m["model"]})

    def apply(self, event: dict[str, Any]) -> None:
        """Take one adapter event (see `app.providers.base`) and turn it into public events."""
        if self.settled:
            self.late_frames += 1
            return
        kind = event["type"]
        if kind == "usage":
            self.set_usage(event)
            return
        if not self.started:
            self._commit()
        if kind in ("text_delta", "thinking_delta", "toolcall_delta"):
            block = self._require_open(kind)
            delta = self._joiner.feed(event["delta"])
            if not delta:
                return
            parts = self._open_parts
            parts.append(delta)
            if len(parts) >= 256:
                # A long block: keep a few joined chunks, neither thousands of small strings nor one string
                # re-joined again and again (each re-join would copy the whole text so far).
                self._open_chunks.append("".join(parts))
                parts.clear()
            self._enqueue_delta(kind, block["_index"], delta)
        elif kind in _BLOCK_KINDS:
            self._open_block(kind, event)
        elif kind in ("text_end", "thinking_end", "toolcall_end"):
            self._close_block(kind, event)
        else:
            raise ContractViolation(f"unknown adapter event {kind!r}")

    def set_usage(self, tokens: dict[str, int]) -> None:
        self.message["usage"] = priced_usage(tokens, self.pricing)

    def settle_done(self, reason: str) -> bool:
        """Settle as `done`. Returns False when the turn had already settled.

        A vendor that reaches its token limit (`length`) may end the message inside a block without closing
        it: a text or thinking block ends there, a tool call whose arguments were cut off raises
        `ToolArgumentsError` (docs/api.md §6, invariant 5: nothing is repaired or invented). Any other block left
        open is a `ContractViolation`."""
        if self.settled:
            return False
        if not self.started:
            self._commit()
        block = self._open
        if block is not None:
            if reason != "length":
                raise ContractViolation(f"done while {block['type']} block {block['_index']} is open")
            if block["type"] == "toolCall":
                self._drop_open_block()
                raise ToolArgumentsError(block["id"], block["name"], ARGUMENTS_CUT_OFF)
            self._close_block(f"{block['type']}_end", {})
        if self.tool_calls:
            reason = "toolUse"
        elif reason == "toolUse":
            reason = "stop"
        self.message["stopReason"] = reason
        self._settle("done", {"type": "done", "reason": reason, "usage": self.message["usage"], "message": self.message})
        return True

    def settle_error(self, message: str, *, aborted: bool = False) -> bool:
        """Settle as `error` (reason `aborted` or `error`), keeping the partial content."""
        if self.settled:
            return False
        self._drop_open_block()
        reason = "aborted" if aborted else "error"
        message = valid_text(message)  # vendor error text can hold half an emoji too
        self.message["stopReason"] = reason
        self.message["errorMessage"] = message
        event = {"type": "error", "reason": reason, "errorMessage": message, "usage": self.message["usage"], "message": self.message}
        self._settle("aborted" if aborted else "error", event)
        return True

    @property
    def congested(self) -> bool:
        """True when the reader is far enough behind that the producer should wait (`wait_drained`)."""
        return self._pending_bytes > self._max_pending

    async def wait_drained(self) -> None:
        while self._pending_bytes > self._max_pending // 2 and self._reader:
            self._drained.clear()
            await self._drained.wait()

    # ----------------------------------------------------------------- consumer side

    async def next_event(self) -> dict[str, Any] | None:
        """The next event to send, or None once the terminal event has been taken."""
        while True:
            if self._ready:
                item = self._ready.popleft()
                if isinstance(item, _PendingDelta):
                    self._pending_bytes -= item.size + _EVENT_OVERHEAD
                    item = item.event()
                else:
                    self._pending_bytes -= _EVENT_OVERHEAD
                if self._pending_bytes <= self._max_pending // 2:
                    self._drained.set()
                self.events_sent += 1
                return item
            timeout = None
            if self._held is not None:
                timeout = self._held_until - self._clock()
                if timeout <= 0:
                    self._release_held(by_timer=True)
                    continue
            elif self._closed:
                self._drained.set()
                return None
            self._wakeup.clear()
            if timeout is None:
                await self._wakeup.wait()
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await self._wakeup.wait()
                except TimeoutError:
                    pass

    def close_reader(self) -> None:
        """No one reads the events (any more): stop queueing them and release a producer waiting on the reader."""
        self._reader = False
        self._ready.clear()
        self._held = None
        self._pending_bytes = 0
        self._drained.set()

    # ----------------------------------------------------------------- internals

    def _require_open(self, kind: str) -> dict[str, Any]:
        """The open block that the delta or end event `kind` belongs to."""
        block = self._open
        wanted = _BLOCK_OF[kind]
        if block is None or block["type"] != wanted:
            raise ContractViolation(f"{kind} without an open {wanted} block")
        return block

    def _open_block(self, kind: str, event: dict[str, Any]) -> None:
        if self._open is not None:
            raise ContractViolation(f"{kind} while block {self._open['_index']} is open")
        index = len(self.message["content"])
        block_type = _BLOCK_KINDS[kind]
        if block_type == "toolCall":
            call_id, name = valid_text(event["id"]), valid_text(event["toolName"])
            block = {"type": "toolCall", "id": call_id, "name": name, "arguments": {}}
            public = {"type": kind, "contentIndex": index, "id": call_id, "toolName": name}
        else:
            block = {"type": block_type, block_type: ""}
            public = {"type": kind, "contentIndex": index}
        block["_index"] = index
        self._open = block
        self._open_parts = []
        self._open_chunks = []
        self._joiner.end()
        self.message["content"].append(block)
        if self.first_content_at is None:  # every delta and end follows a block start
            self.first_content_at = self._clock()
        self._enqueue(public)

    def _close_block(self, kind: str, event: dict[str, Any]) -> None:
        block = self._require_open(kind)
        index = block.pop("_index")
        text = self._open_text()
        self._open = None
        if block["type"] == "toolCall":
            if not text:
                # Invariant 4: every call has at least one delta, also when the provider sent none.
                text = "{}"
                self._enqueue_delta("toolcall_delta", index, text)
            try:
                arguments = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                self.message["content"].pop()
                raise ToolArgumentsError(block["id"], block["name"], f"arguments are not valid JSON: {exc}") from None
            if not isinstance(arguments, dict):
                self.message["content"].pop()
                raise ToolArgumentsError(
                    block["id"], block["name"], f"arguments are JSON {type(arguments).__name__}, not an object"
                )
            block["arguments"] = arguments
            if event.get("thoughtSignature"):
                block["thoughtSignature"] = event["thoughtSignature"]
            self.tool_calls += 1
            public = {"type": kind, "contentIndex": index, "toolCall": {k: v for k, v in block.items() if k != "type"}}
        else:
            field = block["type"]
            block[field] = text
            public = {"type": kind, "contentIndex": index, "content": text}
            signature = event.get("signature")
            if signature:
                block["textSignature" if field == "text" else "thinkingSignature"] = signature
                public["contentSignature"] = signature
            if event.get("redacted"):
                block["redacted"] = True
                public["redacted"] = True
        self._enqueue(public)

    def _open_text(self) -> str:
        """The open block's whole text so far (and resets the parts: called when the block ends)."""
        self._joiner.end()  # a surrogate half still waiting never paired
        chunks, parts = self._open_chunks, self._open_parts
        self._open_chunks, self._open_parts = [], []
        return "".join(chunks) + "".join(parts) if chunks else "".join(parts)

    def _drop_open_block(self) -> None:
        """On error: keep a partial text/thinking block, drop a tool call that never completed."""
        block = self._open
        if block is None:
            return
        block.pop("_index", None)
        if block["type"] == "toolCall":
            self.message["content"].pop()
        else:
            block[block["type"]] = self._open_text()
        self._open = None

    def _settle(self, outcome: str, event: dict[str, Any]) -> None:
        self.settled = True
        self.outcome = outcome
        self.terminal = event
        if self._held is not None:
            self._release_held(by_timer=False)
        self._enqueue(event)
        self._closed = True

    def _enqueue(self, event: dict[str, Any]) -> None:
        if not self._reader:
            return
        if self._held is not None:
            self._release_held(by_timer=False)
        self._pending_bytes += _EVENT_OVERHEAD
        self._ready.append(event)
        self._wakeup.set()

    def _enqueue_delta(self, type_: str, index: int, text: str) -> None:
        if not self._reader:
            return
        self._pending_bytes += len(text)
        held = self._held
        if held is not None:
            if held.type == type_ and held.index == index:
                held.add(text)
                return
            self._release_held(by_timer=False)
        if self._throttle > 0:
            tail = self._ready[-1] if self._ready else None
            if isinstance(tail, _PendingDelta) and tail.type == type_ and tail.index == index:
                tail.add(text)  # the reader has not taken the previous delta yet: merge, do not queue
                return
            key = (type_, index)
            now = self._clock()
            if key == self._window_key and now < self._window_end:
                self._held = _PendingDelta(type_, index, text)
                self._pending_bytes += _EVENT_OVERHEAD
                self._held_until = self._window_end
                self._wakeup.set()
                return
            self._window_key = key
            self._window_end = now + self._throttle
        self._pending_bytes += _EVENT_OVERHEAD
        self._ready.append(_PendingDelta(type_, index, text))
        self._wakeup.set()

    def _release_held(self, *, by_timer: bool) -> None:
        held = self._held
        self._held = None
        if held is None:
            return
        self._ready.append(held)
        if by_timer:
            self._window_end = self._clock() + self._throttle
        self._wakeup.set()
