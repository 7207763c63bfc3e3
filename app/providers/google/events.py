"""Translate Gemini `streamGenerateContent` chunks into adapter events.

A chunk is the wire JSON as a dict (camelCase, signatures as base64 text: what the adapter reads, see
`wire.py`) or the SDK's `GenerateContentResponse` (snake_case attributes, signatures as bytes); both read
the same here. A list, text or token count of another type is a malformed chunk (retryable).

Mapping (reference: pi-ai's google provider, with its gaps closed):
- only `candidates[0].content.parts` is read; a part with `thought: true` is thinking, other text is text;
  a part of the other kind closes the open block (`*_end`) and opens a new one (`*_start`)
- empty text emits nothing; a `thoughtSignature` on it goes to the open block of its kind (or, when none
  is open, to the next one), which is how Gemini 3 signs a text answer (on a final empty part)
- `functionCall` → the open block is closed, then `toolcall_start`, ONE `toolcall_delta` with the args
  as JSON (`{}` when absent) and `toolcall_end` carrying the part's `thoughtSignature`; a call without
  an id (Gemini 2.x), or with one already used in this turn, gets `<name>_<counter>_<random>`
- `usageMetadata` (every chunk, latest wins): input = prompt − cached (the prompt count includes the
  cache), cacheRead = cached, output = candidates + thoughts; a usage event only when the counts changed
  (each one is priced by the turn: counts repeated on the next chunk would be priced again for nothing)
- `finishReason` STOP → stop (the event stream makes it toolUse when a call was made), MAX_TOKENS →
  length; every other reason is a ProviderError naming it, also when a call was made. It is raised at the
  next call (`end()`, as the body ends there), so the parts of the finishing chunk still reach the message
- a prompt blocked by `promptFeedback.blockReason` raises; a body that ends without a finishReason raises
- `groundingMetadata` (Google Search ran, a hosted tool) → one `websearch_start` / `websearch_end` before the
  finish: the `webSearchQueries` joined, the `groundingChunks`' web sources
"""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

from app.contract.adapter_events import (
    BLOCK_DELTA,
    BLOCK_END,
    BLOCK_START,
    AdapterEvent,
    BlockEnd,
    StopReason,
    ToolCallEnd,
    UsageEvent,
)
from app.contract.failures import ErrorKind
from app.providers.base import ProviderError, token_count, wire_text

STOP_REASONS: dict[str, StopReason] = {"STOP": "stop", "MAX_TOKENS": "length"}
# Finish reasons that are safety stops: a refusal. Any other unmapped one is a stop that cannot be success.
SAFETY_REASONS = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"})


def _get(obj: Any, snake: str, camel: str | None = None) -> Any:
    """A field of an SDK object (snake_case) or of a wire dict (camelCase, or snake_case). Called a dozen times
    per chunk: the wire dict (what the adapter reads) is tested first, by its exact type."""
    if type(obj) is dict or isinstance(obj, dict):
        if camel is not None:
            value = obj.get(camel)
            if value is not None:
                return value
        return obj.get(snake)
    if obj is None:
        return None
    return getattr(obj, snake, None)


_NONE: tuple[Any, ...] = ()


def _items(value: Any, field: str) -> list[Any] | tuple[Any, ...]:
    """A list field of a chunk (not copied: it is only read); one of another type is a chunk Gemini would not
    send (the SDK's typed objects refused such a chunk; the wire dicts the adapter reads are checked here)."""
    if value is None:
        return _NONE
    if isinstance(value, (list, tuple)):
        return value
    raise ProviderError(f"sent a malformed chunk: {field} is not a list", retryable=True, kind=ErrorKind.MALFORMED)


def _enum(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def signature_text(value: Any) -> str | None:
    """A thoughtSignature as the base64 text Gemini sent (the SDK hands it over decoded, as bytes)."""
    if not value:
        return None
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


class GoogleTranslator:
    def __init__(self) -> None:
        self.finished = False
        self.response_id: str | None = None  # the vendor's response id and model version (`Translator`)
        self.response_model: str | None = None
        self._open: str | None = None  # "text" | "thinking"
        self._signature: str | None = None  # of the open block
        self._pending_signature: dict[str, str] = {}  # for the next block of a kind
        self._calls = 0
        self._ids: set[str] = set()
        self._failure: ProviderError | None = None  # an error finish, raised once its chunk was delivered
        self._grounding: Any = None  # `groundingMetadata` (a Google Search ran): one search before the finish
        self._last_usage: UsageEvent | None = None  # the usage event sent last (an equal one adds nothing)

    def feed(self, wire: Any) -> list[AdapterEvent]:
        if self._failure is not None:
            raise self._failure
        events: list[AdapterEvent] = []
        if self.response_id is None:
            self.response_id = _get(wire, "response_id", "responseId")
            self.response_model = _get(wire, "model_version", "modelVersion")
        candidates = _items(_get(wire, "candidates"), "candidates")
        candidate = candidates[0] if candidates else None
        content = _get(candidate, "content")
        for part in _items(_get(content, "parts"), "parts"):
            events.extend(self._part(part))
        usage = _get(wire, "usage_metadata", "usageMetadata")
        if usage is not None:
            counts = self._usage(usage)  # read (and checked) on every chunk
            if counts != self._last_usage:  # the same counts as the previous chunk's: nothing to price again
                self._last_usage = counts
                events.append(counts)
        grounding = _get(candidate, "grounding_metadata", "groundingMetadata")
        if grounding is not None:
            self._grounding = grounding  # the latest wins: Gemini may send it again as it grows
        reason = _enum(_get(candidate, "finish_reason", "finishReason"))
        if reason:
            if self._grounding is not None:
                events.extend(self._close())
                events.extend(self._web_search(self._grounding))
            events.extend(self._finish(reason, _get(candidate, "finish_message", "finishMessage")))
        elif not candidates:
            block = _enum(_get(_get(wire, "prompt_feedback", "promptFeedback"), "block_reason", "blockReason"))
            if block:
                self.finished = True
                raise ProviderError(f"blocked the prompt: blockReason={block}", kind=ErrorKind.REFUSAL)
        return events

    def end(self) -> list[AdapterEvent]:
        if self._failure is not None:
            raise self._failure
        if not self.finished:
            raise ProviderError(
                "stream ended without a finishReason (truncated)", retryable=True, kind=ErrorKind.TRUNCATED
            )
        return []

    # ------------------------------------------------------------------ parts

    def _part(self, part: Any) -> list[AdapterEvent]:
        call = _get(part, "function_call", "functionCall")
        signature = signature_text(_get(part, "thought_signature", "thoughtSignature"))
        if call is not None:
            return self._call(call, signature)
        text = _get(part, "text")
        if text is None:
            return []  # inline data, executable code and part kinds this gateway does not know
        if not isinstance(text, str):
            raise ProviderError(
                "sent a malformed chunk: a part's text is not a string", retryable=True, kind=ErrorKind.MALFORMED
            )
        kind = "thinking" if _get(part, "thought") is True else "text"
        events: list[AdapterEvent] = []
        if text:
            if self._open != kind:
                events.extend(self._close())
                self._open = kind
                self._signature = self._pending_signature.pop(kind, None)
                events.append({"type": BLOCK_START[kind]})
            events.append({"type": BLOCK_DELTA[kind], "delta": text})
        if signature:
            if self._open == kind:
                self._signature = signature  # the last non-empty signature wins
            else:
                self._pending_signature[kind] = signature
        return events

    def _call(self, call: Any, signature: str | None) -> list[AdapterEvent]:
        events = self._close()
        name = wire_text(_get(call, "name"), "a functionCall's name") or "unknown_tool"
        self._calls += 1
        call_id = wire_text(_get(call, "id"), "a functionCall's id")
        if not call_id or call_id in self._ids:
            call_id = f"{name}_{self._calls}_{secrets.token_hex(4)}"
        self._ids.add(call_id)
        args = _get(call, "args")
        end: ToolCallEnd = {"type": "toolcall_end"}
        if signature:
            end["thoughtSignature"] = signature
        events += [
            {"type": "toolcall_start", "id": call_id, "toolName": name},
            {
                "type": "toolcall_delta",
                "delta": json.dumps(args if args is not None else {}, ensure_ascii=False, separators=(",", ":")),
            },
            end,
        ]
        return events

    def _close(self) -> list[AdapterEvent]:
        if self._open is None:
            return []
        event: BlockEnd = {"type": BLOCK_END[self._open]}
        if self._signature:
            event["signature"] = self._signature
        self._open = None
        self._signature = None
        return [event]

    # ------------------------------------------------------------------ usage and finish

    def _usage(self, usage: Any) -> UsageEvent:
        prompt = token_count(_get(usage, "prompt_token_count", "promptTokenCount"), "promptTokenCount")
        cached = token_count(
            _get(usage, "cached_content_token_count", "cachedContentTokenCount"), "cachedContentTokenCount"
        )
        candidates = token_count(_get(usage, "candidates_token_count", "candidatesTokenCount"), "candidatesTokenCount")
        thoughts = token_count(_get(usage, "thoughts_token_count", "thoughtsTokenCount"), "thoughtsTokenCount")
        event: UsageEvent = {
            "type": "usage",
            "input": max(prompt - cached, 0),
            "output": token_count(candidates + thoughts, "candidatesTokenCount"),
            "cacheRead": cached,
            "cacheWrite": 0,
        }
        if thoughts:
            event["reasoning"] = thoughts
        return event

    def _web_search(self, grounding: Any) -> list[AdapterEvent]:
        """Grounding with Google Search (the vendor's own search, a hosted tool) as one search: its queries
        (joined) and the web sources it grounded the answer in; none when it did not search."""
        queries = [wire_text(q, "a webSearchQueries entry") for q in _items(_get(grounding, "web_search_queries", "webSearchQueries"), "webSearchQueries")]  # fmt: skip
        sources = []
        for chunk in _items(_get(grounding, "grounding_chunks", "groundingChunks"), "groundingChunks"):
            web = _get(chunk, "web")
            if web is not None and (url := wire_text(_get(web, "uri"), "a grounding chunk's uri")):
                sources.append({"url": url, "title": wire_text(_get(web, "title"), "a grounding chunk's title")})
        if not queries and not sources:
            return []
        search_id = f"gs_{self.response_id or 'search'}"
        return [{"type": "websearch_start", "id": search_id},
                {"type": "websearch_end", "id": search_id, "query": " | ".join(q for q in queries if q),
                 "status": "completed", "sources": sources}]  # fmt: skip

    def _finish(self, reason: str, message: Any) -> list[AdapterEvent]:
        self.finished = True
        mapped = STOP_REASONS.get(reason)
        if mapped is None:
            detail = f": {message}" if message else ""
            kind = ErrorKind.REFUSAL if reason in SAFETY_REASONS else ErrorKind.STOP_REASON
            self._failure = ProviderError(f"stopped: finishReason={reason}{detail}", kind=kind)
            return []
        return [*self._close(), {"type": "finish", "reason": mapped}]
