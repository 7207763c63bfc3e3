"""Translate Chat Completions chunks (`chat.completion.chunk`, the SDK's raw stream) into adapter events.

Only choice 0 is read. Per delta, in this order:
- thinking: `reasoning_content`, else `reasoning`, else the `text` of `reasoning_details` entries of type
  `reasoning.text` (vendors repeat one text in several of these fields; it counts once). A signature in
  `reasoning_details` (`signature`, or the `data` of a `reasoning.encrypted` entry) becomes the thinking
  block's signature, so the same model can be sent it back; without one the signature is the name of the field
  the thinking came in (`reasoning_content` / `reasoning`), the field it is replayed in. Mistral's typed content parts
  (`[{"type": "thinking", "thinking": [{"type": "text", ...}]}, {"type": "text", ...}]`) count too.
- text: a non-empty string `content` (whitespace included) or typed `text` parts; `refusal` streams as text and
  the turn then fails as a refusal.
- tool calls, assembled by `index`. A fragment without `index` (Mistral) that brings a new `id` starts a new
  call, one without `id` continues the open one. Id and name come from the first fragment that has them; a
  call without a vendor id gets a stable synthesized one (`call_<hash of response id and index>`).
  Fragments of a call after another call began are refused (never re-ordered or invented).

Usage: the last non-null `usage` object, emitted once per distinct value (Groq repeats it), its counts read
through `token_count` (clamped to 0..=1e9; a count that is not a whole number is malformed). input =
prompt_tokens − cached (`prompt_tokens_details.cached_tokens`, or DeepSeek's `prompt_cache_hit_tokens`),
cacheRead = cached, output = completion_tokens, plus reasoning_tokens where total_tokens shows the vendor
counts them outside completion_tokens (xAI).

The terminal signal is the `finish_reason`, acted on once usage has come too (with it, or in the trailing
`choices: []` chunk that follows it), else at the end of the body: `stop` → stop, `length` → length, `tool_calls` → toolUse (the event stream makes it
`toolUse` whenever a call completed, `stop` when none did; an unknown reason with completed calls is toolUse);
`content_filter` and a refusal raise (kind refusal); a body without any `finish_reason` raises (truncated).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from app.contract.adapter_events import BLOCK_DELTA, BLOCK_START, AdapterEvent, BlockEnd, StopReason, UsageEvent
from app.contract.failures import ErrorKind
from app.providers.base import ProviderError, error_detail, token_count, wire_index

_REASONING_FIELDS = ("reasoning_content", "reasoning")
STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


def synthesized_id(response_id: str, index: Any) -> str:
    """A stable id for a call the vendor sent without one (same stream → same id)."""
    digest = hashlib.sha256(f"{response_id}:{index}".encode()).hexdigest()[:24]
    return f"call_{digest}"


@dataclass
class _Call:
    key: Any
    id: str | None = None
    name: str | None = None
    started: bool = False
    held: list[str] = field(default_factory=list)  # argument fragments that came before the name


class ChatCompletionsTranslator:
    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.refused = False
        self.response_id: str = ""  # the vendor's completion id and model (`Translator`)
        self.response_model: str | None = None
        self._open: str | None = None  # text | thinking | toolcall
        self._signature: str | None = None  # of the open thinking block: a vendor signature or the field name
        self._call: _Call | None = None  # the open tool call
        self._closed_calls: set[Any] = set()
        self._calls_done = 0
        self._usage: UsageEvent | None = None
        self._auto_keys = 0
        self._settled = False  # the finish event went out (or the terminal error is pending)
        self._pending: ProviderError | None = None

    # ------------------------------------------------------------------ Translator protocol

    def feed(self, wire: Any) -> list[AdapterEvent]:
        if self._pending is not None:
            self._raise_pending()
        if self._settled:
            return []  # frames after the turn settled (Groq repeats its usage) change nothing
        if not isinstance(wire, dict):
            raise ProviderError(f"sent a chunk that is not a JSON object: {str(wire)[:100]}", kind=ErrorKind.MALFORMED)
        if wire.get("error"):  # the SDK raises for these; a sender that slipped one past it ends the same way
            raise ProviderError(f"sent an error event: {error_detail(wire)}", retryable=True, kind=ErrorKind.UPSTREAM)
        if not self.response_id and isinstance(wire.get("id"), str):
            self.response_id = wire["id"]
            self.response_model = wire.get("model") if isinstance(wire.get("model"), str) else None
        events: list[AdapterEvent] = []
        choices = wire.get("choices")
        if choices:
            choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
            if choice is not None:
                delta = choice.get("delta")
                if isinstance(delta, dict) and delta:
                    self._delta(delta, events)
                if choice.get("finish_reason"):
                    self.finish_reason = str(choice["finish_reason"])
        usage = wire.get("usage")
        if isinstance(usage, dict):
            self._set_usage(usage, events)
        if self.finish_reason is not None and self._usage is not None and not self._settled:
            # The turn is complete: settle now rather than at the end of the body (after `[DONE]` the SDK drains
            # the rest of the body, which a stalled vendor may never end). An error waits for the next frame or
            # the end, so the usage that came with it is applied first.
            try:
                events.extend(self._settle())
            except ProviderError as error:
                self._pending = error
        return events

    def end(self) -> list[AdapterEvent]:
        if self._pending is not None:
            self._raise_pending()
        if self._settled:
            return []
        return self._settle()

    def _raise_pending(self) -> None:
        error, self._pending = self._pending, None
        assert error is not None
        raise error

    def _settle(self) -> list[AdapterEvent]:
        self._settled = True
        events = self._close() if self._open is not None else []
        reason = self.finish_reason
        if self.refused:
            raise ProviderError("refused: the answer is a refusal", kind=ErrorKind.REFUSAL)
        if reason is None:
            raise ProviderError(
                "stream ended without a finish_reason (truncated)", retryable=True, kind=ErrorKind.TRUNCATED
            )
        if reason == "content_filter":
            raise ProviderError("stopped by the content filter: finish_reason=content_filter", kind=ErrorKind.REFUSAL)
        # The event stream makes it toolUse when a call completed, stop when none did; `length` stays, so that a
        # call the token limit cut off is reported as such (app.core.dispatcher).
        mapped = STOP_REASONS.get(reason)
        if mapped is None and self._calls_done:
            mapped = "toolUse"  # an unknown reason with completed calls: the calls say what happened
        if mapped is None:
            raise ProviderError(f"stopped for an unknown reason: finish_reason={reason}", kind=ErrorKind.STOP_REASON)
        return events + [{"type": "finish", "reason": mapped}]

    # ------------------------------------------------------------------ deltas

    def _delta(self, delta: dict[str, Any], events: list[AdapterEvent]) -> None:
        source = next((f for f in _REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        thinking = delta[source] if source else None
        details = delta.get("reasoning_details")
        if isinstance(details, list) and details:
            detail_text = self._details(details, events)
            thinking = thinking or detail_text
        if thinking:
            self._text("thinking", thinking, events)
            if source and self._signature is None:
                self._signature = source  # replayed in the field it came in, unless a real signature comes
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self._text("text", content, events)
        elif isinstance(content, list):
            self._parts(content, events)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.refused = True
            self._text("text", refusal, events)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for fragment in calls:
                if isinstance(fragment, dict):
                    self._tool_fragment(fragment, events)

    def _details(self, details: list[Any], events: list[AdapterEvent]) -> str:
        """The thinking text in `reasoning_details` entries; keeps their signature for the block's end."""
        texts: list[str] = []
        for entry in details:
            if not isinstance(entry, dict):
                continue
            kind = entry.get("type")
            if kind == "reasoning.text" and isinstance(entry.get("text"), str):
                texts.append(entry["text"])
            signature = entry.get("signature") or (entry.get("data") if kind == "reasoning.encrypted" else None)
            if isinstance(signature, str) and signature:
                if self._open is None:  # an encrypted entry with no text before it
                    self._switch("thinking", events)
                if self._open == "thinking":  # a signature after the thinking ended has nothing to sign
                    self._signature = signature
        return "".join(texts)

    def _parts(self, parts: list[Any], events: list[AdapterEvent]) -> None:
        for part in parts:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str) and part["text"]:
                self._text("text", part["text"], events)
            elif part.get("type") == "thinking":
                inner = part.get("thinking")
                if isinstance(inner, str):
                    texts = [inner]
                else:
                    texts = [p.get("text") or "" for p in inner or [] if isinstance(p, dict)]
                if text := "".join(texts):
                    self._text("thinking", text, events)

    def _text(self, kind: str, text: str, events: list[AdapterEvent]) -> None:
        if self._open != kind:
            self._switch(kind, events)
        events.append({"type": BLOCK_DELTA[kind], "delta": text})

    def _switch(self, kind: str, events: list[AdapterEvent]) -> None:
        if self._open is not None:
            events.extend(self._close())
        self._open = kind
        events.append({"type": BLOCK_START[kind]})

    def _close(self) -> list[AdapterEvent]:
        kind, self._open = self._open, None
        if kind == "thinking":
            end: BlockEnd = {"type": "thinking_end"}
            if self._signature:
                end["signature"] = self._signature
            self._signature = None
            return [end]
        if kind == "text":
            return [{"type": "text_end"}]
        call, self._call = self._call, None
        assert call is not None
        self._closed_calls.add(call.key)
        events: list[AdapterEvent] = []
        if not call.started:
            raise ProviderError(f"sent tool call {call.id or call.key} without a name", kind=ErrorKind.PROTOCOL)
        self._calls_done += 1
        events.append({"type": "toolcall_end"})
        return events

    # ------------------------------------------------------------------ tool calls

    def _key(self, fragment: dict[str, Any]) -> Any:
        index = wire_index(fragment.get("index"), "a tool call index")
        if index is not None:
            return ("index", index)
        vendor_id = fragment.get("id")
        if vendor_id and (self._call is None or (self._call.id and self._call.id != vendor_id)):
            self._auto_keys += 1
            return ("auto", self._auto_keys)
        if self._call is None:
            self._auto_keys += 1
            return ("auto", self._auto_keys)
        return self._call.key

    def _tool_fragment(self, fragment: dict[str, Any], events: list[AdapterEvent]) -> None:
        key = self._key(fragment)
        function = fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        if self._open != "toolcall" or self._call is None or self._call.key != key:
            if key in self._closed_calls:
                raise ProviderError(
                    f"sent arguments for tool call {key[1]} after another call began", kind=ErrorKind.PROTOCOL
                )
            if self._open is not None:
                events.extend(self._close())
            self._open = "toolcall"
            self._call = _Call(key)
        call = self._call
        if call.id is None and isinstance(fragment.get("id"), str) and fragment["id"]:
            call.id = fragment["id"]
        if call.name is None and isinstance(function.get("name"), str) and function["name"]:
            call.name = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few local servers send the arguments as an object
            arguments = json.dumps(arguments, ensure_ascii=False)
        if isinstance(arguments, str) and arguments:
            call.held.append(arguments)
        if not call.started and call.name is not None:
            call.started = True
            call_id = call.id or synthesized_id(self.response_id, key[1])
            call.id = call_id
            events.append({"type": "toolcall_start", "id": call_id, "toolName": call.name})
        if call.started and call.held:
            events.extend({"type": "toolcall_delta", "delta": text} for text in call.held)
            call.held.clear()

    # ------------------------------------------------------------------ usage

    def _set_usage(self, usage: dict[str, Any], events: list[AdapterEvent]) -> None:
        prompt = token_count(usage.get("prompt_tokens"), "prompt_tokens")
        completion = token_count(usage.get("completion_tokens"), "completion_tokens")
        details = usage.get("prompt_tokens_details")
        cached = token_count(details.get("cached_tokens"), "cached_tokens") if isinstance(details, dict) else 0
        cached = cached or token_count(usage.get("prompt_cache_hit_tokens"), "prompt_cache_hit_tokens")
        output_details = usage.get("completion_tokens_details")
        reasoning = (
            token_count(output_details.get("reasoning_tokens"), "reasoning_tokens")
            if isinstance(output_details, dict)
            else 0
        )
        total = usage.get("total_tokens")
        if reasoning and total == prompt + completion + reasoning:
            completion += reasoning  # reasoning counted outside completion_tokens (xAI)
        tokens: UsageEvent = {
            "type": "usage",
            "input": max(prompt - cached, 0),
            "output": token_count(completion, "completion_tokens"),
            "cacheRead": min(cached, prompt),
            "cacheWrite": 0,
        }
        if reasoning:
            tokens["reasoning"] = reasoning
        if tokens != self._usage:
            self._usage = tokens
            events.append(tokens)
