"""Encode the normalized event stream as Anthropic Messages server-sent events, and a settled turn as one
`message` object.

    start                    → message_start (id `msg_<requestId>`, model `<provider>/<model>`, usage so far)
    text_start / _delta      → content_block_start {text} / content_block_delta text_delta
    thinking_start / _delta  → content_block_start {thinking} / content_block_delta thinking_delta
    thinking_end             → content_block_delta signature_delta (origin-wrapped, `app.doors.signatures`)
                               then content_block_stop
    thinking, redacted       → content_block_start {redacted_thinking, data: origin-wrapped} + content_block_stop
    toolcall_start / _delta  → content_block_start {tool_use} / content_block_delta input_json_delta
    toolcall_end             → content_block_stop; for a call signed on its own (Gemini), then a thinking block
                               with empty text and the call's signature (`app.doors.signatures.wrap_call`), and every later
                               block's index moves one on
    *_end                    → content_block_stop
    websearch_start / _end   → nothing: the vendor's own search (a client's `web_search_…` server tool) is not
                               client content here; every later block's index moves one back
    done                     → message_delta (stop_reason, usage) then message_stop
    error                    → event: error {"type": "error", "error": {"type": "api_error", "message"}}

A thinking block's `content_block_start` waits for its first delta (or its end): only `thinking_end` says
whether the block was redacted, and a redacted block is a different block type on this wire. Usage is in
Anthropic's sense: `input_tokens` without cache reads and writes, which have fields of their own.

`message_start` carries the usage known when the turn starts (Anthropic reports its input then; other
vendors only at the end), `message_delta` the turn's figures. An error before the stream starts is an HTTP
error (`hold_until_start`, `refuse`); after the start it is `event: error`, typed by what ended the turn as
the HTTP error would be (`api_error`, `timeout_error`, `overloaded_error` …).
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from app.doors.anthropic_messages.errors import error_body, turn_error
from app.core.settled import SettledTurn
from app.doors.base import DoorRequest, TurnView
from app.doors.signatures import Origin, origin_of, wrap, wrap_call

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}
PING = b'event: ping\ndata: {"type":"ping"}\n\n'


def frame(name: str, data: dict[str, Any]) -> bytes:
    """One SSE frame; orjson escapes control characters, so `data` is always one line."""
    return b"event: %s\ndata: %s\n\n" % (name.encode(), orjson.dumps(data))


def message_id(request_id: str) -> str:
    return f"msg_{request_id}"


def anthropic_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Anthropic's usage of a turn's `usage`; where the vendor broke its cache writes down by duration
    (`cacheWrite1h`), the `cache_creation` breakdown Anthropic's API gives."""
    usage = usage or {}
    written = usage.get("cacheWrite", 0)
    answer: dict[str, Any] = {
        "input_tokens": usage.get("input", 0),
        "output_tokens": usage.get("output", 0),
        "cache_read_input_tokens": usage.get("cacheRead", 0),
        "cache_creation_input_tokens": written,
    }
    if (one_hour := usage.get("cacheWrite1h")) is not None:
        answer["cache_creation"] = {
            "ephemeral_5m_input_tokens": written - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        }
    return answer


def served_model(provider: str | None, model: str | None) -> str:
    return f"{provider}/{model}" if provider and model else (model or "")


class MessagesEncoder:
    """Turns one turn's normalized events into Anthropic SSE bytes, or the settled turn into one answer."""

    hold_until_start = True  # an error before the start is an HTTP error, as Anthropic's API answers it

    def __init__(self, request_id: str, request: DoorRequest | None = None, turn: TurnView | None = None) -> None:
        # `request`: the door factory passes the decoded request; nothing in it changes this encoding.
        self.request_id = request_id
        self._turn = turn
        self._origin = Origin("", "", "")
        self._thinking_pending: int | None = None  # a thinking block whose start is not sent yet
        # Blocks this door added before the current one (a call's own signature, `_toolcall_end`): the wire's
        # `index` is the normalized `contentIndex` plus this.
        self._shift = 0
        self._handlers: dict[str, Callable[[dict[str, Any]], bytes]] = {
            "start": self._start,
            "text_start": self._text_start,
            "text_delta": self._text_delta,
            "text_end": self._text_end,
            "thinking_start": self._thinking_start,
            "thinking_delta": self._thinking_delta,
            "thinking_end": self._thinking_end,
            "toolcall_start": self._toolcall_start,
            "toolcall_delta": self._toolcall_delta,
            "toolcall_end": self._toolcall_end,
            "websearch_start": self._nothing,
            "websearch_end": self._websearch_end,
            "done": self._done,
            "error": self._error,
        }

    def encode(self, event: dict[str, Any]) -> bytes:
        """The SSE frames for one normalized event (none for a thinking block's start, see above)."""
        return self._handlers[event["type"]](event)

    def ping(self) -> bytes:
        return PING

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        """One `message` object, or the error with the status of the failure."""
        if result.outcome == "done":
            return 200, message_object(result.message, result.request_id)
        return turn_error(result)

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return turn_error(result)

    def _start(self, event: dict[str, Any]) -> bytes:
        self._origin = origin_of(event)
        message: dict[str, Any] = {
            "id": message_id(self.request_id),
            "type": "message",
            "role": "assistant",
            "model": served_model(event.get("provider"), event.get("model")),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": anthropic_usage(self._turn.usage() if self._turn is not None else None),
        }
        return frame("message_start", {"type": "message_start", "message": message})

    def _block_start(self, index: int, block: dict[str, Any]) -> bytes:
        block_start = {"type": "content_block_start", "index": index + self._shift, "content_block": block}
        return frame("content_block_start", block_start)

    def _delta(self, index: int, delta: dict[str, Any]) -> bytes:
        return frame(
            "content_block_delta", {"type": "content_block_delta", "index": index + self._shift, "delta": delta}
        )

    def _stop(self, index: int) -> bytes:
        return frame("content_block_stop", {"type": "content_block_stop", "index": index + self._shift})

    def _text_start(self, event: dict[str, Any]) -> bytes:
        return self._block_start(event["contentIndex"], {"type": "text", "text": ""})

    def _text_delta(self, event: dict[str, Any]) -> bytes:
        return self._delta(event["contentIndex"], {"type": "text_delta", "text": event["delta"]})

    def _text_end(self, event: dict[str, Any]) -> bytes:
        return self._stop(event["contentIndex"])

    def _thinking_start(self, event: dict[str, Any]) -> bytes:
        self._thinking_pending = event["contentIndex"]
        return b""

    def _open_thinking(self, index: int) -> bytes:
        if self._thinking_pending != index:
            return b""
        self._thinking_pending = None
        return self._block_start(index, {"type": "thinking", "thinking": "", "signature": ""})

    def _thinking_delta(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        return self._open_thinking(index) + self._delta(index, {"type": "thinking_delta", "thinking": event["delta"]})

    def _thinking_end(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        signature = wrap(self._origin, event.get("contentSignature"))
        if event.get("redacted") and self._thinking_pending == index:
            self._thinking_pending = None
            return self._block_start(index, {"type": "redacted_thinking", "data": signature}) + self._stop(index)
        opened = self._open_thinking(index)
        return opened + self._delta(index, {"type": "signature_delta", "signature": signature}) + self._stop(index)

    def _toolcall_start(self, event: dict[str, Any]) -> bytes:
        block = {"type": "tool_use", "id": event["id"], "name": event["toolName"], "input": {}}
        return self._block_start(event["contentIndex"], block)

    def _toolcall_delta(self, event: dict[str, Any]) -> bytes:
        return self._delta(event["contentIndex"], {"type": "input_json_delta", "partial_json": event["delta"]})

    def _toolcall_end(self, event: dict[str, Any]) -> bytes:
        """The call's block ends; a call signed on its own (Gemini) is followed by a thinking block with empty
        text that carries its signature (`app.doors.signatures.wrap_call`), and every later block moves one index on."""
        index = event["contentIndex"]
        stop = self._stop(index)
        signature = event["toolCall"].get("thoughtSignature")
        if not signature:
            return stop
        block = index + 1
        wrapped = wrap_call(self._origin, signature)
        stop += (self._block_start(block, {"type": "thinking", "thinking": "", "signature": ""})
                 + self._delta(block, {"type": "signature_delta", "signature": wrapped}) + self._stop(block))  # fmt: skip
        self._shift += 1
        return stop

    def _nothing(self, event: dict[str, Any]) -> bytes:
        return b""

    def _websearch_end(self, event: dict[str, Any]) -> bytes:
        """The search block is not sent: the wire's blocks after it keep their indexes contiguous."""
        self._shift -= 1
        return b""

    def _done(self, event: dict[str, Any]) -> bytes:
        delta = {"stop_reason": STOP_REASONS[event["reason"]], "stop_sequence": None}
        usage = anthropic_usage(event.get("usage"))
        return frame("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}) + frame(
            "message_stop", {"type": "message_stop"}
        )

    def _error(self, event: dict[str, Any]) -> bytes:
        message = event.get("errorMessage") or "error"
        if self._turn is None:
            return frame("error", error_body("api_error", message, self.request_id))
        _, body = turn_error(self._turn.result(), streaming=True)
        return frame("error", body)


def _content_blocks(block: dict[str, Any], origin: Origin) -> list[dict[str, Any]]:
    """A block of the message as the wire's blocks: itself, and after a call signed on its own its signature's
    thinking block (`MessagesEncoder._toolcall_end`); none for the vendor's web search."""
    if block["type"] == "webSearch":
        return []
    out = _content_block(block, origin)
    if out["type"] == "tool_use" and block.get("thoughtSignature"):
        return [out, {"type": "thinking", "thinking": "", "signature": wrap_call(origin, block["thoughtSignature"])}]
    return [out]


def _content_block(block: dict[str, Any], origin: Origin) -> dict[str, Any]:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "thinking":
        signature = wrap(origin, block.get("thinkingSignature"))
        if block.get("redacted"):
            return {"type": "redacted_thinking", "data": signature}
        return {"type": "thinking", "thinking": block["thinking"], "signature": signature}
    return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["arguments"]}


def message_object(message: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The non-streaming answer for a turn that settled `done` (its final `AssistantMessage`)."""
    origin = origin_of(message)
    return {
        "id": message_id(request_id),
        "type": "message",
        "role": "assistant",
        "model": served_model(message.get("provider"), message.get("model")),
        "content": [wire for b in message["content"] for wire in _content_blocks(b, origin)],
        "stop_reason": STOP_REASONS.get(message.get("stopReason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(message.get("usage")),
    }
