"""Encode the normalized event stream as Gemini's `streamGenerateContent?alt=sse` chunks (or, without `alt=sse`,
the same chunks as one streamed JSON array: `GeminiArrayEncoder`), and a settled turn as one
`GenerateContentResponse`.

Every chunk is `data: <GenerateContentResponse>\\r\\n\\r\\n` with `candidates[0].content.parts` (role `model`),
`modelVersion` (`<provider>/<model>` of the serving model) and `responseId` (the request id), as Gemini frames it:

    text_delta               → a chunk with one `{"text"}` part
    text_end                 → with a signature (Gemini 3 signs text): a `{"text": "", "thoughtSignature"}` part
    thinking_delta           → a `{"text", "thought": true}` part, only when `thinkingConfig.includeThoughts`
    thinking_end             → with a signature and thoughts shown: `{"text": "", "thought": true, "thoughtSignature"}`
    toolcall_end             → one whole `{"functionCall": {"id", "name", "args"}}` part (Gemini never streams
                               arguments), with the call's `thoughtSignature` when it has one; else the first call
                               after signed thinking carries that thinking in its `thoughtSignature` (a client
                               such as the Gemini CLI keeps calls and drops thought parts; `conversation.py`
                               rebuilds the signed thinking blocks from it)
    done                     → a chunk with `finishReason` (`STOP`, `MAX_TOKENS`) and `usageMetadata`
    error                    → an `{"error": {"code", "message", "status"}}` chunk, which the Google GenAI SDKs
                               raise, with a candidate whose `finishReason` says why (a safety stop its reason,
                               a cut tool call `MALFORMED_FUNCTION_CALL`, else `OTHER`) and whose
                               `finishMessage` is the error's message, which the Gemini CLI reads

Signatures are origin-wrapped (`signatures.py`), so they return to the model that made them only. Usage is in
Gemini's sense: `promptTokenCount` includes cached tokens (also in `cachedContentTokenCount`);
`thoughtsTokenCount` is the unified usage's `reasoning` where the vendor counts thinking apart, and
`candidatesTokenCount` the rest of the output (all of it, thinking included, where the vendor does not). Gemini sends no keep-alive frames and its SDKs read none (a
comment line breaks the Python SDK, a blank line the JavaScript one), so neither does this door.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from app.contract.events import TERMINAL_TYPES
from app.core.settled import SettledTurn
from app.doors.base import TurnView
from app.doors.gemini.errors import error_body, finish_reason, turn_error
from app.doors.gemini.request import GeminiRequest
from app.doors.gemini.signatures import wrap_signature, wrap_thinking_signature
from app.doors.signatures import Origin, SignedThinking, origin_of

FINISH_REASONS = {"stop": "STOP", "toolUse": "STOP", "length": "MAX_TOKENS"}
END = b"\r\n\r\n"


def usage_metadata(usage: dict[str, Any] | None) -> dict[str, int]:
    usage = usage or {}
    cached = usage.get("cacheRead", 0)
    prompt = usage.get("input", 0) + cached + usage.get("cacheWrite", 0)
    output = usage.get("output", 0)
    thoughts = min(usage.get("reasoning") or 0, output)  # of `output`: Gemini counts them apart from candidates
    metadata = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output - thoughts,
        "totalTokenCount": prompt + output,
    }
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    if cached:
        metadata["cachedContentTokenCount"] = cached
    return metadata


def served_model(provider: str | None, model: str | None) -> str:
    return f"{provider}/{model}" if provider and model else (model or "")


class GeminiEncoder:
    """One request's encoder (see the module docstring)."""

    hold_until_start = True  # an error before the first chunk is an HTTP error, as Gemini answers it

    LEAD = b"data: "  # what goes before and after each chunk's JSON (`GeminiArrayEncoder` frames them otherwise)
    END = END

    def __init__(self, request_id: str, request: GeminiRequest, turn: TurnView | None = None) -> None:
        self.request_id = request_id
        self.model = request.client_model
        self.include_thoughts = request.include_thoughts
        self._turn = turn
        self._origin = Origin("", "", "")
        # The turn's signed thinking not yet carried on a call: its first call without a signature of its own
        # carries it (`wrap_thinking_signature`), for a client that keeps calls and drops thought parts.
        self._thinking: list[SignedThinking] = []
        self._head = b""
        self._tail = b""
        self._frame_ends()
        self._handlers: dict[str, Callable[[dict[str, Any]], bytes]] = {
            "start": self._start,
            "text_delta": self._text_delta,
            "text_end": self._text_end,
            "thinking_delta": self._thinking_delta,
            "thinking_end": self._thinking_end,
            "toolcall_end": self._toolcall_end,
            "done": self._done,
            "error": self._error,
        }

    def _frame_ends(self) -> None:
        """What every content chunk shares before and after its parts, encoded once."""
        self._head = self.LEAD + b'{"candidates":[{"content":{"parts":['
        self._tail = (b'],"role":"model"},"index":0}],"modelVersion":' + orjson.dumps(self.model)
                      + b',"responseId":' + orjson.dumps(self.request_id) + b"}" + self.END)  # fmt: skip

    def encode(self, event: dict[str, Any]) -> bytes:
        handler = self._handlers.get(event["type"])
        return handler(event) if handler is not None else b""

    def ping(self) -> bytes:
        return b""

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        if result.outcome == "done":
            return 200, self.response_of(result.message)
        return turn_error(result)

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return turn_error(result)

    # ------------------------------------------------------------------------------------------ events

    def _parts(self, *parts: dict[str, Any]) -> bytes:
        return self._head + b",".join(orjson.dumps(p) for p in parts) + self._tail

    def _start(self, event: dict[str, Any]) -> bytes:
        self._origin = origin_of(event)
        if event.get("provider") and event.get("model"):
            self.model = served_model(event["provider"], event["model"])
            self._frame_ends()
        return b""

    def _text_delta(self, event: dict[str, Any]) -> bytes:
        return self._head + b'{"text":' + orjson.dumps(event["delta"]) + b"}" + self._tail

    def _text_end(self, event: dict[str, Any]) -> bytes:
        if not event.get("contentSignature"):
            return b""
        return self._parts({"text": "", "thoughtSignature": wrap_signature(self._origin, event["contentSignature"])})

    def _thinking_delta(self, event: dict[str, Any]) -> bytes:
        if not self.include_thoughts:
            return b""
        return self._head + b'{"text":' + orjson.dumps(event["delta"]) + b',"thought":true}' + self._tail

    def _thinking_end(self, event: dict[str, Any]) -> bytes:
        if event.get("contentSignature"):
            self._thinking.append(
                SignedThinking(event["content"], event["contentSignature"], bool(event.get("redacted")))
            )
        if not self.include_thoughts or not event.get("contentSignature") or event.get("redacted"):
            return b""  # redacted thinking (Anthropic's) has no text to show and no Gemini part to return in
        signature = wrap_signature(self._origin, event["contentSignature"])
        return self._parts({"text": "", "thought": True, "thoughtSignature": signature})

    def _toolcall_end(self, event: dict[str, Any]) -> bytes:
        return self._parts(self._call_part(event["toolCall"]))

    def _call_part(self, call: dict[str, Any]) -> dict[str, Any]:
        part: dict[str, Any] = {
            "functionCall": {"id": call["id"], "name": call["name"], "args": call.get("arguments") or {}}
        }
        if call.get("thoughtSignature"):
            part["thoughtSignature"] = wrap_signature(self._origin, call["thoughtSignature"])
        elif self._thinking:
            part["thoughtSignature"] = wrap_thinking_signature(self._origin, self._thinking)
            self._thinking = []
        return part

    def _done(self, event: dict[str, Any]) -> bytes:
        candidate = {
            "content": {"parts": [{"text": ""}], "role": "model"},
            "finishReason": FINISH_REASONS[event["reason"]],
            "index": 0,
        }
        chunk = {"candidates": [candidate], "usageMetadata": usage_metadata(event.get("usage")),
                 "modelVersion": self.model, "responseId": self.request_id}  # fmt: skip
        return self.LEAD + orjson.dumps(chunk) + self.END

    def _error(self, event: dict[str, Any]) -> bytes:
        if self._turn is None:
            body = error_body(502, event.get("errorMessage") or "error")
        else:
            result = self._turn.result()
            _, body = turn_error(result)
            candidate = {"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": finish_reason(result),
                         "finishMessage": body["error"]["message"], "index": 0}  # fmt: skip
            # `error` first: the Python SDK raises a chunk only when its text starts with `{"error":`.
            body = {**body, "candidates": [candidate], "modelVersion": self.model, "responseId": self.request_id}
        return self.LEAD + orjson.dumps(body) + self.END

    # ------------------------------------------------------------------------------------------ one answer

    def response_of(self, message: dict[str, Any]) -> dict[str, Any]:
        """The non-streaming answer for a turn that settled `done` (its final `AssistantMessage`): one part per
        block, thoughts only when asked for."""
        self._origin = origin_of(message)
        parts: list[dict[str, Any]] = []
        for block in message["content"]:
            kind = block["type"]
            if kind == "text":
                part = {"text": block["text"]}
                if block.get("textSignature"):
                    part["thoughtSignature"] = wrap_signature(self._origin, block["textSignature"])
                parts.append(part)
            elif kind == "thinking":
                if block.get("thinkingSignature"):
                    signed = SignedThinking(block["thinking"], block["thinkingSignature"], bool(block.get("redacted")))
                    self._thinking.append(signed)
                if self.include_thoughts and not block.get("redacted"):
                    part = {"text": block["thinking"], "thought": True}
                    if block.get("thinkingSignature"):
                        part["thoughtSignature"] = wrap_signature(self._origin, block["thinkingSignature"])
                    parts.append(part)
            elif kind == "toolCall":
                parts.append(self._call_part(block))
        reason = FINISH_REASONS.get(message.get("stopReason") or "stop", "STOP")
        candidate = {"content": {"parts": parts, "role": "model"}, "finishReason": reason, "index": 0}
        return {
            "candidates": [candidate],
            "usageMetadata": usage_metadata(message.get("usage")),
            "modelVersion": served_model(message.get("provider"), message.get("model")) or self.model,
            "responseId": self.request_id,
        }


class GeminiArrayEncoder(GeminiEncoder):
    """`streamGenerateContent` without `alt=sse`: the same chunks as one JSON array streamed element by element,
    as Gemini answers it (`[{chunk},\r\n{chunk}…]`, `application/json`). The terminal event's chunk (the last
    `finishReason` chunk, or an `{"error": …}` element after the stream started) is the last element, then `]`."""

    LEAD = b""
    END = b""
    SEPARATOR = b",\r\n"

    def __init__(self, request_id: str, request: GeminiRequest, turn: TurnView | None = None) -> None:
        super().__init__(request_id, request, turn)
        self._before = b"["  # what goes before the next element: the array's opening, then a separator

    def encode(self, event: dict[str, Any]) -> bytes:
        element = super().encode(event)
        if event["type"] in TERMINAL_TYPES:
            return self._before + element + b"]" if element else (b"[]" if self._before == b"[" else b"]")
        if not element:
            return b""
        element, self._before = self._before + element, self.SEPARATOR
        return element
