"""Translate Anthropic Messages wire events (the SDK's raw stream) into adapter events.

Mapping (reference: pi-ai's anthropic provider, with its bugs fixed):
- `message_start` → usage (input, cacheRead, cacheWrite, output so far; of cacheWrite, the 1-hour writes
  `cacheWrite1h` from `cache_creation.ephemeral_1h_input_tokens` when the vendor reports them)
- `content_block_start` text/thinking/redacted_thinking/tool_use → `*_start`; the `web_search` server tool's
  `server_tool_use` → `websearch_start` and its `web_search_tool_result` → `websearch_end` (query, sources);
  other server tools and unknown block types (compaction, …) are not client content and are skipped with
  their deltas
- `text_delta`/`thinking_delta`/`input_json_delta` → deltas; `signature_delta` extends the thinking signature
- `content_block_stop` → `*_end` (the event stream parses tool arguments strictly)
- `message_delta` → usage (non-null fields overwrite) and the stop reason; when the usage carries
  `iterations` (server-side compaction ran a second model call) the turn's usage is their sum, since
  every iteration is billed and the top-level fields describe only the last one
- `message_stop` → `finish`; refusal/sensitive or an unknown stop reason raise instead
- a body that ends without `message_stop` raises (truncated)
"""

from __future__ import annotations

import json
from typing import Any

from app.contract.adapter_events import AdapterEvent, StopReason, UsageEvent, WebSearchEnd
from app.contract.failures import ErrorKind
from app.providers.base import ProviderError, token_count, wire_index, wire_name, wire_text

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    # The vendor paused its own server-tool loop (a long web search) before the answer was complete: the
    # answer is cut short, as at the token limit, never a clean end (docs/adapters/web-search.md).
    "pause_turn": "length",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
REFUSALS = frozenset({"refusal", "sensitive"})

_USAGE_FIELDS = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cache_read_input_tokens", "cacheRead"),
    ("cache_creation_input_tokens", "cacheWrite"),
)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


_ONE_HOUR = "cache_creation.ephemeral_1h_input_tokens"


def _one_hour_writes(usage: Any) -> int | None:
    """Of a usage's cache writes, those with a 1-hour TTL (`cache_control.ttl: "1h"`), billed at twice the
    input price rather than the 5-minute write's 1.25 ×; None when the usage does not break its writes down."""
    value = _get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    return None if value is None else token_count(value, _ONE_HOUR)


class AnthropicTranslator:
    def __init__(self) -> None:
        self.usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        self.one_hour_writes: int | None = None  # `cache_creation.ephemeral_1h_input_tokens`, once reported
        self.stop_reason: str | None = None
        self.finished = False
        self.response_id: str | None = None  # the vendor's message id and model (`Translator`)
        self.response_model: str | None = None
        self._blocks: dict[int | None, str] = {}  # wire index -> our block kind ("skip" for non-client blocks)
        self._signature: list[str] = []
        self._redacted_data: str | None = None
        self._search: list[Any] | None = None  # the running web search: [its id, its input's JSON fragments]

    def feed(self, wire: Any) -> list[AdapterEvent]:
        is_dict = type(wire) is dict  # the raw stream's decoded JSON (tests also feed the SDK's typed events)
        kind = wire.get("type") if is_dict else getattr(wire, "type", None)
        if kind == "content_block_delta":
            if is_dict:
                return self._delta(wire.get("index"), wire.get("delta"))
            return self._delta(getattr(wire, "index", None), getattr(wire, "delta", None))
        if kind == "content_block_start":
            return self._start(wire)
        if kind == "content_block_stop":
            return self._stop(wire)
        if kind == "message_start":
            message = _get(wire, "message")
            self.response_id, self.response_model = _get(message, "id"), _get(message, "model")
            return self._usage(_get(message, "usage"))
        if kind == "message_delta":
            self.stop_reason = _get(_get(wire, "delta"), "stop_reason") or self.stop_reason
            return self._usage(_get(wire, "usage"))
        if kind == "message_stop":
            return self._finish()
        if kind == "error":
            error = _get(wire, "error") or {}
            raise ProviderError(
                f"sent an error event: {_get(error, 'type', 'error')}: {_get(error, 'message', '')}", retryable=True
            )
        return []  # ping and event types this gateway does not know yet

    def end(self) -> list[AdapterEvent]:
        if not self.finished:
            raise ProviderError(
                "stream ended before message_stop (truncated)", retryable=True, kind=ErrorKind.TRUNCATED
            )
        return []

    def _usage(self, usage: Any) -> list[AdapterEvent]:
        if usage is None:
            return []
        iterations = _get(usage, "iterations")
        if iterations and isinstance(iterations, list):
            for wire_name, name in _USAGE_FIELDS:
                total = sum(token_count(_get(item, wire_name), wire_name) for item in iterations)
                self.usage[name] = token_count(total, wire_name)
            if any(_one_hour_writes(item) is not None for item in iterations):
                total = sum(_one_hour_writes(item) or 0 for item in iterations)
                self.one_hour_writes = token_count(total, _ONE_HOUR)
        else:
            for wire_name, name in _USAGE_FIELDS:
                value = _get(usage, wire_name)
                if value is not None:
                    self.usage[name] = token_count(value, wire_name)
            if (one_hour := _one_hour_writes(usage)) is not None:
                self.one_hour_writes = one_hour
        counts = self.usage
        event: UsageEvent = {
            "type": "usage",
            "input": counts["input"],
            "output": counts["output"],
            "cacheRead": counts["cacheRead"],
            "cacheWrite": counts["cacheWrite"],
        }
        if self.one_hour_writes is not None:
            event["cacheWrite1h"] = self.one_hour_writes
        return [event]

    def _start(self, wire: Any) -> list[AdapterEvent]:
        index = wire_index(_get(wire, "index"), "a content block index")
        block = _get(wire, "content_block")
        block_type = _get(block, "type")
        if block_type == "text":
            self._blocks[index] = "text"
            events: list[AdapterEvent] = [{"type": "text_start"}]
            if text := wire_text(_get(block, "text"), "a text block's text"):
                events.append({"type": "text_delta", "delta": text})
            return events
        if block_type == "thinking":
            self._blocks[index] = "thinking"
            self._signature = [wire_text(_get(block, "signature"), "a thinking block's signature")]
            events = [{"type": "thinking_start"}]
            if text := wire_text(_get(block, "thinking"), "a thinking block's thinking"):
                events.append({"type": "thinking_delta", "delta": text})
            return events
        if block_type == "redacted_thinking":
            self._blocks[index] = "redacted"
            self._redacted_data = wire_text(_get(block, "data"), "a redacted_thinking block's data")
            return [{"type": "thinking_start"}]
        if block_type == "tool_use":
            self._blocks[index] = "toolcall"
            return [
                {
                    "type": "toolcall_start",
                    "id": wire_name(_get(block, "id"), "a tool_use block's id"),
                    "toolName": wire_name(_get(block, "name"), "a tool_use block's name"),
                }
            ]
        if block_type == "server_tool_use" and _get(block, "name") == "web_search":
            self._blocks[index] = "search"  # the vendor's own search (a hosted tool): its query streams as input
            search_id = wire_name(_get(block, "id"), "a server_tool_use block's id")
            self._search = [search_id, []]
            return [{"type": "websearch_start", "id": search_id}]
        if block_type == "web_search_tool_result":
            self._blocks[index] = "skip"
            return [self._search_result(block)]
        self._blocks[index] = "skip"
        return []

    def _search_result(self, block: Any) -> WebSearchEnd:
        """A `web_search_tool_result` as the end of its search: the query (the `server_tool_use` input), the
        results' urls and titles, or `failed` for an error result."""
        search_id = wire_name(_get(block, "tool_use_id"), "a web_search_tool_result's tool_use_id")
        query = ""
        if self._search is not None and self._search[0] == search_id:
            try:
                query = json.loads("".join(self._search[1]) or "{}").get("query") or ""
            except (ValueError, AttributeError):
                query = ""
        self._search = None
        content = _get(block, "content")
        if not isinstance(content, list):  # `web_search_tool_result_error`
            return {"type": "websearch_end", "id": search_id, "query": query, "status": "failed", "sources": []}
        sources = [{"url": wire_text(_get(r, "url"), "a web search result's url"),
                    "title": wire_text(_get(r, "title"), "a web search result's title")} for r in content]  # fmt: skip
        return {
            "type": "websearch_end",
            "id": search_id,
            "query": wire_text(query, "a web search's query"),
            "status": "completed",
            "sources": [s for s in sources if s["url"]],
        }

    def _delta(self, index: Any, delta: Any) -> list[AdapterEvent]:
        """A `content_block_delta`: its `index` and its `delta` (once per token: read without `_get` when the
        delta is a dict)."""
        block = self._blocks.get(wire_index(index, "a content block index"))
        is_dict = type(delta) is dict
        delta_type = delta.get("type") if is_dict else _get(delta, "type")
        if delta_type == "text_delta" and block == "text":
            text = delta.get("text") if is_dict else _get(delta, "text")
            return [
                {"type": "text_delta", "delta": text if type(text) is str else wire_text(text, "a text_delta's text")}
            ]
        if delta_type == "input_json_delta" and block == "toolcall":
            return [
                {
                    "type": "toolcall_delta",
                    "delta": wire_text(_get(delta, "partial_json"), "an input_json_delta's partial_json"),
                }
            ]
        if delta_type == "thinking_delta" and block == "thinking":
            return [
                {"type": "thinking_delta", "delta": wire_text(_get(delta, "thinking"), "a thinking_delta's thinking")}
            ]
        if delta_type == "input_json_delta" and block == "search" and self._search is not None:
            self._search[1].append(wire_text(_get(delta, "partial_json"), "an input_json_delta's partial_json"))
            return []
        if delta_type == "signature_delta" and block == "thinking":
            self._signature.append(wire_text(_get(delta, "signature"), "a signature_delta's signature"))
            return []
        if block is None:
            raise ProviderError(f"sent {delta_type} for unknown content block {index}")
        return []  # citations and deltas of skipped blocks

    def _stop(self, wire: Any) -> list[AdapterEvent]:
        block = self._blocks.pop(wire_index(_get(wire, "index"), "a content block index"), None)
        if block == "text":
            return [{"type": "text_end"}]
        if block == "thinking":
            signature = "".join(self._signature)
            self._signature = []
            return [{"type": "thinking_end", "signature": signature} if signature else {"type": "thinking_end"}]
        if block == "redacted":
            data, self._redacted_data = self._redacted_data or "", None
            return [{"type": "thinking_end", "signature": data, "redacted": True}]
        if block == "toolcall":
            return [{"type": "toolcall_end"}]
        return []

    def _finish(self) -> list[AdapterEvent]:
        self.finished = True
        reason = self.stop_reason
        if reason in REFUSALS:
            raise ProviderError(f"refused: stop_reason={reason}", kind=ErrorKind.REFUSAL)
        mapped = STOP_REASONS.get(reason or "end_turn")
        if mapped is None:
            raise ProviderError(f"ended with an unknown stop_reason={reason}", kind=ErrorKind.STOP_REASON)
        return [{"type": "finish", "reason": mapped}]
