"""The message builder of one turn: block order, the `AssistantMessage`, and the settle guard (docs/internals.md).

A `MessageBuilder` takes adapter events (`app.contract.adapter_events`) from the dispatcher and is the only
place that

- sends `start` at the first content event, naming the provider and model that serve the turn;
- assigns `contentIndex` and keeps blocks from interleaving (`ContractViolation` otherwise);
- keeps tool call ids unique in the conversation: a call whose id the vendor already gave in this turn or in
  the request's history (`taken_call_ids`: vendors that number their calls per answer, or send none and get a
  stable one) gets a fresh id, `gw<random>_<vendor id>`; clients key calls by id (Claude Code runs a call
  whose id it has seen never again, and the Messages door refuses a history with a repeated id);
- builds the `AssistantMessage` from the events it lets through, so `*_end.content` is by construction the
  concatenation of the block's deltas and a tool call's `arguments` are by construction its parsed deltas
  (`ToolArgumentsError` when they do not parse, or when the token limit cut them off);
- keeps streamed text valid (`app.stream.surrogates`: surrogate pairs cut between events);
- settles exactly once (the settle guard): the first terminal outcome wins, every adapter event after it is
  dropped and counted as a late frame.

The public events it produces go to a sink, the turn's `EventQueue` (`app.stream.queue`), which coalesces
them and bounds what waits for the reader. All mutation happens on the event loop thread.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Callable, Mapping, Protocol

import orjson

from app.contract.catalog_entries import Pricing
from app.contract.adapter_events import AdapterEvent
from app.contract.messages import AssistantMessage, Context, ToolCall
from app.stream.surrogates import SurrogateJoiner, valid_text
from app.stream.pricing import new_usage, priced_usage

_BLOCK_KINDS = {"text_start": "text", "thinking_start": "thinking", "toolcall_start": "toolCall"}
# The block type each delta and end event belongs to.
_BLOCK_OF = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "toolcall_delta": "toolCall",
    "text_end": "text",
    "thinking_end": "thinking",
    "toolcall_end": "toolCall",
}


_SEARCH_KINDS = frozenset({"websearch_start", "websearch_end"})


class ContractViolation(RuntimeError):
    """An adapter produced events out of order. A bug of ours, reported as an internal error."""


ARGUMENTS_CUT_OFF = "arguments were cut off by the token limit (stop reason length)"
CUT_INSIDE_ARGUMENTS = "was cut off inside its arguments"


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


class EventSink(Protocol):
    """Where the builder's public events go (the turn's `EventQueue`)."""

    def put(self, event: dict[str, Any]) -> None: ...

    def put_delta(self, type_: str, index: int, text: str) -> None: ...

    def close(self, last: dict[str, Any]) -> None: ...


def history_call_ids(context: Context) -> set[str]:
    """The ids of the tool calls in a request's history (a new turn's calls must not repeat them)."""
    return {
        block.id
        for message in context.messages
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, ToolCall)
    }


class MessageBuilder:
    __slots__ = (  # one per open stream
        "request_id",
        "message",
        "pricing",
        "_sink",
        "_clock",
        "_open",
        "_open_parts",
        "_open_chunks",
        "_joiner",
        "started",
        "settled",
        "terminal",
        "outcome",
        "tool_calls",
        "late_frames",
        "first_content_at",
        "created_at",
        "hosted",
        "_searches",
        "taken_call_ids",
    )

    def __init__(self, request_id: str, sink: EventSink, *, clock: Callable[[], float] = time.monotonic) -> None:
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
        self._sink = sink
        self._clock = clock

        # Block state.
        self._open: dict[str, Any] | None = None
        self._open_parts: list[str] = []  # the open block's recent deltas
        self._open_chunks: list[str] = []  # …and its earlier ones, joined 256 at a time
        self._joiner = SurrogateJoiner()  # the open block's deltas as valid text (emoji cut between events)

        # Hosted tools: the vendor's own web searches are passed on only when the request asked for hosted tools
        # (`options.hostedTools`, set by the gateway), so clients that did not see nothing new.
        self.hosted = False
        self._searches: dict[str, dict[str, Any]] = {}  # search id → its `webSearch` block (with `_index`)
        # Tool call ids the conversation already has (the request's history, set by the gateway, then this
        # turn's): a call the vendor gives one of them is renamed (`_call_id`).
        self.taken_call_ids: set[str] = set()

        # Settlement and counters.
        self.started = False
        self.settled = False
        self.terminal: dict[str, Any] | None = None
        self.outcome: str | None = None  # done | error | aborted
        self.tool_calls = 0
        self.late_frames = 0
        self.first_content_at: float | None = None
        self.created_at = clock()

    # ----------------------------------------------------------------- from the dispatcher

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
        self._sink.put(
            {
                "type": "start",
                "requestId": self.request_id,
                "provider": m["provider"],
                "api": m["api"],
                "model": m["model"],
            }
        )

    def apply(self, event: AdapterEvent) -> None:
        """Take one adapter event (`app.contract.adapter_events`) and turn it into public events."""
        if self.settled:
            self.late_frames += 1
            return
        kind = event["type"]
        if kind == "usage":
            self.set_usage(event)
            return
        if not self.started:
            if kind in _SEARCH_KINDS and not self.hosted:
                return
            self._commit()
        if event["type"] in ("text_delta", "thinking_delta", "toolcall_delta"):  # narrows `event` to a `Delta`
            block = self._open
            if block is None or block["type"] != _BLOCK_OF[kind]:
                block = self._require_open(kind)  # raises
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
            self._sink.put_delta(kind, block["_index"], delta)
        elif kind in _BLOCK_KINDS:
            self._open_block(kind, event)
        elif kind in ("text_end", "thinking_end", "toolcall_end"):
            self._close_block(kind, event)
        elif kind in _SEARCH_KINDS:
            if self.hosted:
                self._web_search(kind, event)
        else:
            raise ContractViolation(f"unknown adapter event {kind!r}")

    def set_usage(self, tokens: Mapping[str, Any]) -> None:
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
        self._settle(
            "done", {"type": "done", "reason": reason, "usage": self.message["usage"], "message": self.message}
        )
        return True

    def settle_error(self, message: str, *, aborted: bool = False) -> bool:
        """Settle as `error` (reason `aborted` or `error`), keeping the partial content."""
        if self.settled:
            return False
        cut = self._open if self._open is not None and self._open["type"] == "toolCall" else None
        if cut is not None and not aborted and cut["id"] not in message:
            # The error names the call it cut off inside its arguments: a client that saw the call begin (or,
            # through the Chat Completions door, never saw it at all) learns which call it must not run.
            message = f"{message}; tool call {cut['id']} ({cut['name']}) {CUT_INSIDE_ARGUMENTS}"
        self._drop_open_block()
        reason = "aborted" if aborted else "error"
        message = valid_text(message)  # vendor error text can hold half an emoji too
        self.message["stopReason"] = reason
        self.message["errorMessage"] = message
        event = {
            "type": "error",
            "reason": reason,
            "errorMessage": message,
            "usage": self.message["usage"],
            "message": self.message,
        }
        self._settle("aborted" if aborted else "error", event)
        return True

    # ----------------------------------------------------------------- internals

    def _require_open(self, kind: str) -> dict[str, Any]:
        """The open block that the delta or end event `kind` belongs to."""
        block = self._open
        wanted = _BLOCK_OF[kind]
        if block is None or block["type"] != wanted:
            raise ContractViolation(f"{kind} without an open {wanted} block")
        return block

    def _open_block(self, kind: str, event: Mapping[str, Any]) -> None:
        if self._open is not None:
            raise ContractViolation(f"{kind} while block {self._open['_index']} is open")
        index = len(self.message["content"])
        block_type = _BLOCK_KINDS[kind]
        block: dict[str, Any]
        if block_type == "toolCall":
            call_id, name = self._call_id(valid_text(event["id"])), valid_text(event["toolName"])
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
        self._sink.put(public)

    def _call_id(self, vendor_id: str) -> str:
        """The vendor's call id, or a fresh one when the conversation already has it (see the module doc)."""
        call_id = vendor_id
        while call_id in self.taken_call_ids:
            call_id = f"gw{secrets.token_hex(4)}_{vendor_id}"
        self.taken_call_ids.add(call_id)
        return call_id

    def _close_block(self, kind: str, event: Mapping[str, Any]) -> None:
        block = self._require_open(kind)
        index = block.pop("_index")
        text = self._open_text()
        self._open = None
        if block["type"] == "toolCall":
            if not text:
                # Invariant 4: every call has at least one delta, also when the provider sent none.
                text = "{}"
                self._sink.put_delta("toolcall_delta", index, text)
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
                block["thoughtSignature"] = valid_text(event["thoughtSignature"])
            self.tool_calls += 1
            public = {"type": kind, "contentIndex": index, "toolCall": {k: v for k, v in block.items() if k != "type"}}
        else:
            field = block["type"]
            block[field] = text
            public = {"type": kind, "contentIndex": index, "content": text}
            signature = event.get("signature")
            if signature:
                signature = valid_text(signature)  # e.g. a Responses reasoning item, JSON of vendor text
                block["textSignature" if field == "text" else "thinkingSignature"] = signature
                public["contentSignature"] = signature
            if event.get("redacted"):
                block["redacted"] = True
                public["redacted"] = True
        self._sink.put(public)

    def _web_search(self, kind: str, event: Mapping[str, Any]) -> None:
        """A web search the vendor ran: a `webSearch` block without deltas, opened by `websearch_start` and
        filled in by `websearch_end` (an end whose start was never seen opens it too). No other block may be
        open when one starts."""
        search_id = valid_text(event["id"])
        block = self._searches.get(search_id)
        if block is None:
            if self._open is not None:
                raise ContractViolation(f"{kind} while block {self._open['_index']} is open")
            index = len(self.message["content"])
            block = {"type": "webSearch", "id": search_id, "query": "", "status": "searching", "sources": []}
            self.message["content"].append(block)
            self._searches[search_id] = block
            block["_index"] = index
            self._sink.put({"type": "websearch_start", "contentIndex": index, "id": search_id})
        if kind == "websearch_end":
            if block.get("_index") is None:
                raise ContractViolation(f"web search {search_id} ended twice")
            index = block.pop("_index")
            block["query"] = valid_text(event.get("query") or "")
            block["status"] = event.get("status") or "completed"
            block["sources"] = [
                {"url": valid_text(s["url"]), **({"title": valid_text(s["title"])} if s.get("title") else {})}
                for s in event.get("sources") or ()
                if s.get("url")
            ]
            self._sink.put({"type": "websearch_end", "contentIndex": index, "webSearch": dict(block)})

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
        """The settle guard's one write: callers have checked `settled`."""
        self.settled = True
        self.outcome = outcome
        self.terminal = event
        for block in self._searches.values():  # a search still running when the turn ended stays `searching`
            block.pop("_index", None)
        self._sink.close(event)
