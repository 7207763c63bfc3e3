"""Translate OpenAI Responses wire events (the SDK's raw stream) into adapter events.

Mapping (reference: pi-ai's openai-responses provider, with its gaps closed):
- `output_item.added` reasoning / message / function_call → `thinking_start` / `text_start` / `toolcall_start`
  (tool call id `"<call_id>|<item_id>"`); a `web_search_call` (the vendor's own search, a hosted tool) →
  `websearch_start`, its `output_item.done` → `websearch_end` with the query and sources; other item types
  (built-in tools) are skipped with their events
- `reasoning_summary_text.delta` → `thinking_delta`; a new summary part after `reasoning_summary_part.done`
  first gets a `"\\n\\n"` delta, so the thinking text is the summaries joined by a blank line
- `output_text.delta` and `refusal.delta` → `text_delta` (a refusal streams as text, the turn then fails)
- `function_call_arguments.delta` → `toolcall_delta`; when no delta came, the whole arguments from
  `function_call_arguments.done` (or `output_item.done`) go out as one `toolcall_delta`
- `output_item.done` → `*_end`. Text the deltas did not carry is sent first (never re-sent). The thinking
  signature is the whole reasoning item as JSON (replayable); the text signature is `{"v":1,"id":…}`.
  A `done` for an item that was never `added` opens and closes it in one go.
- `response.completed` → usage and `finish` (stop); a refusal raises instead
- `response.incomplete` → usage and `finish` (length) for `max_output_tokens`; any other reason
  (e.g. `content_filter`) raises
- `response.failed` and `error` → raise with the vendor's code and message
- a body that ends without completed/incomplete/failed raises (truncated)

Usage comes only with the terminal event: input = input_tokens − cached_tokens, cacheRead = cached_tokens,
reasoning = output_tokens_details.reasoning_tokens (when not 0).
Where a terminal event carries usage but ends the turn as an error (refusal, content filter), the usage is
emitted and the error raised on the next frame or at the end of the body, so the failed turn is still billed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from app.contract.adapter_events import AdapterEvent, BlockEnd, DeltaType, ToolCallEnd, UsageEvent, WebSearchEnd
from app.contract.failures import ErrorKind
from app.providers.base import ProviderError, token_count, wire_name, wire_text
from app.stream.surrogates import valid_text

_CLIENT_ITEMS = frozenset({"reasoning", "message", "function_call"})  # every other item type is skipped
_NOT_RETRYABLE_CODES = ("invalid", "context_length", "content_policy", "content_filter", "unsupported")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_dict(obj: Any) -> dict[str, Any]:
    """An SDK model (or a dict) as the JSON-ready dict the vendor sent."""
    if isinstance(obj, dict):
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is not None:
        return to_dict(mode="json")
    return dict(obj)


def _retryable(code: Any) -> bool:
    text = str(code or "").lower()
    return not any(marker in text for marker in _NOT_RETRYABLE_CODES)


@dataclass
class _Item:
    """The output item whose block is open."""

    kind: str  # text | thinking | toolcall
    id: str
    sent: list[str] = field(default_factory=list)  # what went out as deltas
    part_done: bool = False  # thinking: a summary part ended; the next one starts after "\n\n"
    refusal: bool = False

    @property
    def text(self) -> str:
        return "".join(self.sent)


def web_search_end(item: Any) -> WebSearchEnd:
    """A finished `web_search_call` item as the end of the vendor's search: its query (`action.query`, or the
    first of `action.queries`), its status, and the sources the vendor listed (`action.sources`, sent when the
    request's `include` asked for them)."""
    action = _get(item, "action") or {}
    query = _get(action, "query") or next(iter(_get(action, "queries") or ()), "")
    sources = [{"url": wire_text(_get(s, "url"), "a web search source's url")} for s in _get(action, "sources") or ()]
    status: Literal["completed", "failed"] = "failed" if _get(item, "status") == "failed" else "completed"
    return {
        "type": "websearch_end",
        "id": wire_text(_get(item, "id"), "a web_search_call's id"),
        "query": wire_text(query, "a web search's query"),
        "status": status,
        "sources": [s for s in sources if s["url"]],
    }


class OpenAIResponsesTranslator:
    def __init__(self) -> None:
        self.finished = False
        self.refused = False
        self.response_id: str | None = None  # the vendor's response id and model (`Translator`)
        self.response_model: str | None = None
        self._open: _Item | None = None
        self._skipped: set[str] = set()
        self._searching: set[str] = set()  # web_search_call items whose search started
        self._pending: ProviderError | None = None

    # ------------------------------------------------------------------ Translator protocol

    def feed(self, wire: Any) -> list[AdapterEvent]:
        if self._pending is not None:
            self._raise_pending()
        kind = _get(wire, "type")
        handler = _HANDLERS.get(kind)
        return handler(self, wire) if handler is not None else []  # created, in_progress, unknown events

    def end(self) -> list[AdapterEvent]:
        if self._pending is not None:
            self._raise_pending()
        if not self.finished:
            raise ProviderError(
                "stream ended before response.completed (truncated)", retryable=True, kind=ErrorKind.TRUNCATED
            )
        return []

    # ------------------------------------------------------------------ items

    def _item_added(self, wire: Any) -> list[AdapterEvent]:
        return self._open_item(_get(wire, "item"))

    def _open_item(self, item: Any) -> list[AdapterEvent]:
        item_type = _get(item, "type")
        item_id = _get(item, "id") or ""
        if item_type not in _CLIENT_ITEMS:
            self._skipped.add(item_id)
            if item_type == "web_search_call" and item_id and self._open is None:  # the vendor's own search
                self._searching.add(item_id)
                return [{"type": "websearch_start", "id": item_id}]
            return []
        events = self._close_open() if self._open is not None else []  # the vendor never finished it
        if item_type == "reasoning":
            self._open = _Item("thinking", item_id)
            events.append({"type": "thinking_start"})
        elif item_type == "message":
            self._open = _Item("text", item_id)
            events.append({"type": "text_start"})
        else:
            self._open = _Item("toolcall", item_id)
            name = wire_name(_get(item, "name"), "a function_call's name")
            events.append({"type": "toolcall_start", "id": f"{_get(item, 'call_id')}|{item_id}", "toolName": name})
            if arguments := _get(item, "arguments"):
                events.extend(self._delta("toolcall_delta", arguments))
        return events

    def _item_done(self, wire: Any) -> list[AdapterEvent]:
        item = _get(wire, "item")
        item_id = _get(item, "id") or ""
        if _get(item, "type") == "web_search_call" and item_id and (item_id in self._searching or self._open is None):
            self._skipped.discard(item_id)
            self._searching.discard(item_id)
            return [web_search_end(item)]  # (a search inside an open message, never seen so far, stays skipped)
        if item_id in self._skipped:
            self._skipped.discard(item_id)
            return []
        events: list[AdapterEvent] = []
        if self._open is None or self._open.id != item_id:
            events = self._open_item(item)  # a `done` without its `added`
            if self._open is None or self._open.id != item_id:
                self._skipped.discard(item_id)
                return events
        return events + self._close_open(item)

    def _close_open(self, item: Any = None) -> list[AdapterEvent]:
        """End the open block; `item` is the finished output item (None when the vendor never finished it)."""
        current = self._open
        assert current is not None
        events: list[AdapterEvent] = []
        end: BlockEnd | ToolCallEnd
        if current.kind == "thinking":
            end = {"type": "thinking_end"}
            if item is not None:
                summary = "\n\n".join(_get(p, "text") or "" for p in _get(item, "summary") or [])
                events.extend(self._catch_up("thinking_delta", summary))
                end["signature"] = json.dumps(_as_dict(item), ensure_ascii=False, separators=(",", ":"))
        elif current.kind == "text":
            end = {"type": "text_end"}
            if item is not None:
                texts: list[str] = []
                for part in _get(item, "content") or []:
                    if _get(part, "type") == "refusal":
                        current.refusal = True
                        texts.append(_get(part, "refusal") or "")
                    else:
                        texts.append(_get(part, "text") or "")
                events.extend(self._catch_up("text_delta", "".join(texts)))
                signature: dict[str, Any] = {"v": 1, "id": current.id}
                if phase := _get(item, "phase"):
                    signature["phase"] = phase
                end["signature"] = json.dumps(signature, separators=(",", ":"))
            self.refused = self.refused or current.refusal
        else:
            if item is not None and not current.sent and (arguments := _get(item, "arguments")):
                events.extend(self._delta("toolcall_delta", arguments))
            end = {"type": "toolcall_end"}
        events.append(end)
        self._open = None
        return events

    def _catch_up(self, delta_type: DeltaType, final: str) -> list[AdapterEvent]:
        """The part of the item's final text that no delta carried (nothing when the deltas disagree). Compared
        as valid text: deltas may hold halves of a surrogate pair the event stream joins (app.stream.surrogates)."""
        assert self._open is not None
        sent, final = valid_text(self._open.text), valid_text(final)
        if len(final) > len(sent) and final.startswith(sent):
            return self._delta(delta_type, final[len(sent) :])
        return []

    def _delta(self, delta_type: DeltaType, text: Any) -> list[AdapterEvent]:
        assert self._open is not None
        text = wire_text(text, f"a {delta_type.replace('_', ' ')}")
        if not text:
            return []
        self._open.sent.append(text)
        return [{"type": delta_type, "delta": text}]

    def _owner(self, wire: Any, kind: str) -> _Item | None:
        """The open block a delta event belongs to; None for deltas of skipped items."""
        item_id = _get(wire, "item_id")
        current = self._open
        if current is not None and current.kind == kind and (item_id is None or item_id == current.id):
            return current
        if item_id in self._skipped:
            return None
        raise ProviderError(f"sent {_get(wire, 'type')} for output item {item_id} that is not open")

    # ------------------------------------------------------------------ deltas

    def _text_delta(self, wire: Any) -> list[AdapterEvent]:
        if self._owner(wire, "text") is None:
            return []
        return self._delta("text_delta", _get(wire, "delta") or "")

    def _refusal_delta(self, wire: Any) -> list[AdapterEvent]:
        owner = self._owner(wire, "text")
        if owner is None:
            return []
        owner.refusal = True
        return self._delta("text_delta", _get(wire, "delta") or "")

    def _content_part_added(self, wire: Any) -> list[AdapterEvent]:
        if _get(_get(wire, "part"), "type") == "refusal":
            owner = self._owner(wire, "text")
            if owner is not None:
                owner.refusal = True
        return []

    def _summary_part_added(self, wire: Any) -> list[AdapterEvent]:
        owner = self._owner(wire, "thinking")
        return self._part_break(owner) if owner is not None else []

    def _summary_delta(self, wire: Any) -> list[AdapterEvent]:
        owner = self._owner(wire, "thinking")
        if owner is None:
            return []
        return self._part_break(owner) + self._delta("thinking_delta", _get(wire, "delta") or "")

    def _part_break(self, owner: _Item) -> list[AdapterEvent]:
        if not owner.part_done:
            return []
        owner.part_done = False
        return self._delta("thinking_delta", "\n\n") if owner.sent else []

    def _summary_part_done(self, wire: Any) -> list[AdapterEvent]:
        owner = self._owner(wire, "thinking")
        if owner is not None:
            owner.part_done = True
        return []

    def _arguments_delta(self, wire: Any) -> list[AdapterEvent]:
        if self._owner(wire, "toolcall") is None:
            return []
        return self._delta("toolcall_delta", _get(wire, "delta") or "")

    def _arguments_done(self, wire: Any) -> list[AdapterEvent]:
        owner = self._owner(wire, "toolcall")
        if owner is None or owner.sent:
            return []
        return self._delta("toolcall_delta", _get(wire, "arguments") or "")

    # ------------------------------------------------------------------ terminal events

    def _usage(self, response: Any) -> list[AdapterEvent]:
        usage = _get(response, "usage")
        if usage is None:
            return []
        cached = token_count(_get(_get(usage, "input_tokens_details"), "cached_tokens"), "cached_tokens")
        prompt = token_count(_get(usage, "input_tokens"), "input_tokens")
        event: UsageEvent = {
            "type": "usage",
            "input": max(prompt - cached, 0),
            "output": token_count(_get(usage, "output_tokens"), "output_tokens"),
            "cacheRead": min(cached, prompt),
            "cacheWrite": 0,
        }
        reasoning = token_count(_get(_get(usage, "output_tokens_details"), "reasoning_tokens"), "reasoning_tokens")
        if reasoning:
            event["reasoning"] = reasoning
        return [event]

    def _terminal(self, wire: Any) -> list[AdapterEvent]:
        self.finished = True
        events = self._close_open() if self._open is not None else []
        return events + self._usage(_get(wire, "response"))

    def _created(self, wire: Any) -> list[AdapterEvent]:
        response = _get(wire, "response")
        self.response_id, self.response_model = _get(response, "id"), _get(response, "model")
        return []

    def _completed(self, wire: Any) -> list[AdapterEvent]:
        events = self._terminal(wire)
        if self.refused:
            self._pending = ProviderError("refused: the response is a refusal", kind=ErrorKind.REFUSAL)
            return events
        return events + [{"type": "finish", "reason": "stop"}]

    def _incomplete(self, wire: Any) -> list[AdapterEvent]:
        events = self._terminal(wire)
        reason = _get(_get(_get(wire, "response"), "incomplete_details"), "reason") or "unknown"
        if reason == "max_output_tokens" and not self.refused:
            return events + [{"type": "finish", "reason": "length"}]
        if reason == "content_filter":
            self._pending = ProviderError(
                "stopped by the content filter: incomplete reason=content_filter", kind=ErrorKind.REFUSAL
            )
        elif self.refused:
            self._pending = ProviderError(
                f"refused: the response is a refusal (incomplete reason={reason})", kind=ErrorKind.REFUSAL
            )
        else:
            self._pending = ProviderError(f"response incomplete: reason={reason}", kind=ErrorKind.STOP_REASON)
        return events

    def _failed(self, wire: Any) -> list[AdapterEvent]:
        self.finished = True
        response = _get(wire, "response")
        error = _get(response, "error")
        code, message = _get(error, "code"), _get(error, "message")
        if error is None:
            detail = f"status={_get(response, 'status') or 'failed'} (no error details)"
        else:
            detail = f"{code or 'error'}: {message or ''}".strip()
        raise ProviderError(f"response failed: {detail}", retryable=_retryable(code), kind=ErrorKind.UPSTREAM)

    def _error(self, wire: Any) -> list[AdapterEvent]:
        error = _get(wire, "error")  # the Responses `error` event is flat; some senders nest an `error` object
        if error is not None:
            code, message = _get(error, "code") or _get(error, "type"), _get(error, "message") or ""
        else:
            code, message = _get(wire, "code"), _get(wire, "message") or ""
        raise ProviderError(f"sent an error event: {code or 'error'}: {message}".strip(), retryable=_retryable(code))

    def _raise_pending(self) -> None:
        error, self._pending = self._pending, None
        assert error is not None
        raise error


_HANDLERS = {
    "response.created": OpenAIResponsesTranslator._created,
    "response.output_item.added": OpenAIResponsesTranslator._item_added,
    "response.output_item.done": OpenAIResponsesTranslator._item_done,
    "response.content_part.added": OpenAIResponsesTranslator._content_part_added,
    "response.output_text.delta": OpenAIResponsesTranslator._text_delta,
    "response.refusal.delta": OpenAIResponsesTranslator._refusal_delta,
    "response.reasoning_summary_part.added": OpenAIResponsesTranslator._summary_part_added,
    "response.reasoning_summary_text.delta": OpenAIResponsesTranslator._summary_delta,
    "response.reasoning_summary_part.done": OpenAIResponsesTranslator._summary_part_done,
    "response.function_call_arguments.delta": OpenAIResponsesTranslator._arguments_delta,
    "response.function_call_arguments.done": OpenAIResponsesTranslator._arguments_done,
    "response.completed": OpenAIResponsesTranslator._completed,
    "response.incomplete": OpenAIResponsesTranslator._incomplete,
    "response.failed": OpenAIResponsesTranslator._failed,
    "error": OpenAIResponsesTranslator._error,
}
