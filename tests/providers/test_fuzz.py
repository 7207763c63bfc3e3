"""Property-based fuzzing of each vendor api's adapter + the dispatcher + the event stream, with generated wire
streams (one section per api below, then the two tests every api runs, parametrized by `VENDORS`).

Valid streams must normalize exactly: content, stop reason and usage. Corrupted ones (the vendor-neutral
mutations of tests/harness.py — dropped, duplicated, reordered, truncated, retyped events, a transport failure —
and each vendor's own odd frames: unknown events, garbled arguments, frames after the end, error events, …)
must keep every invariant of the conformance checker and never end in an internal error.
`FUZZ_EXAMPLES=N` sets the number of examples (e.g. for a soak run).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from google.genai import models, types
from hypothesis import given
from hypothesis import strategies as st

from app.providers.anthropic.events import AnthropicTranslator
from app.providers.google.events import GoogleTranslator
from app.providers.openai_completions.events import ChatCompletionsTranslator
from app.providers.openai_responses.events import OpenAIResponsesTranslator
from tests.conformance import check_events
from tests.harness import (
    ScriptedProvider,
    arguments,
    corrupt,
    fuzz_corrupt,
    fuzz_valid,
    run_corrupted,
    run_script,
    split,
    utf16_split,
    valid_text,
    wire_text,
)


@dataclass(frozen=True)
class Script:
    """A generated wire stream and what the gateway must make of it."""

    wire: list[Any]
    content: list[dict[str, Any]]  # the done message's content; a toolCall id None: the gateway makes one up
    reason: str
    tokens: tuple[int, int, int] | None  # (input, output, cacheRead); None where the stream does not vary them


@dataclass
class Corrupted:
    """A script after one mutation: the wire to play, the transport error its end raises, where it struck."""

    wire: list[Any]
    fail_with: BaseException | None
    at: int
    mutation: str
    seed: int


# ---------------------------------------------------------------------------------- anthropic-messages

ANTHROPIC_STOPS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "length", "max_tokens": "length",
                   "tool_use": "toolUse"}  # fmt: skip


@st.composite
def anthropic_stream(draw: Any) -> Script:
    usage_in = draw(st.integers(0, 10_000))
    wire = [{"type": "message_start", "message": {"usage": {"input_tokens": usage_in, "output_tokens": 1}}}]
    expected = []
    kinds = draw(st.lists(st.sampled_from(["text", "thinking", "tool", "redacted", "server"]), max_size=5))
    for index, kind in enumerate(kinds):
        if kind == "text":
            text = draw(wire_text)
            chunks = utf16_split(draw, text) if text else []
            wire.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            wire += [
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": c}}
                for c in chunks
            ]
            expected.append({"type": "text", "text": valid_text(text)})
        elif kind == "thinking":
            text = draw(wire_text)
            chunks = utf16_split(draw, text) if text else []
            signature = draw(st.text(alphabet="abcdef0123456789", min_size=1, max_size=12))
            wire.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }
            )
            wire += [
                {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": c}}
                for c in chunks
            ]
            wire.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": signature},
                }
            )
            expected.append({"type": "thinking", "thinking": valid_text(text), "thinkingSignature": signature})
        elif kind == "redacted":
            wire.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "redacted_thinking", "data": "blob"},
                }
            )
            expected.append({"type": "thinking", "thinking": "", "thinkingSignature": "blob", "redacted": True})
        elif kind == "tool":
            args = draw(arguments)
            text = json.dumps(args, ensure_ascii=False) if args or draw(st.booleans()) else ""
            call_id = f"toolu_{index}"
            wire.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": "tool", "input": {}},
                }
            )
            wire += [
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": f},
                }
                for f in utf16_split(draw, text)
            ]
            expected.append({"type": "toolCall", "id": call_id, "name": "tool", "arguments": args})
        else:
            wire.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
                }
            )
            wire.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": '{"q": 1}'},
                }
            )
        wire.append({"type": "content_block_stop", "index": index})
    stop = draw(st.sampled_from(sorted(ANTHROPIC_STOPS)))
    wire.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop},
            "usage": {"output_tokens": draw(st.integers(0, 5000))},
        }
    )
    wire.append({"type": "message_stop"})
    has_calls = any(b["type"] == "toolCall" for b in expected)
    reason = "toolUse" if has_calls else "stop" if ANTHROPIC_STOPS[stop] == "toolUse" else ANTHROPIC_STOPS[stop]
    return Script(wire, expected, reason, None)


def anthropic_frames(c: Corrupted) -> None:
    if c.mutation == "unknown":
        c.wire.insert(c.at, {"type": "mystery_event", "payload": [1, 2]})
    elif c.mutation == "garble":
        c.wire.insert(
            c.at,
            {
                "type": "content_block_delta",
                "index": c.seed % 4,
                "delta": {"type": "input_json_delta", "partial_json": "}{"},
            },
        )
    elif c.mutation == "late":
        c.wire += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "late"}},
            {"type": "message_stop"},
        ]
    elif c.mutation == "error_event":
        c.wire.insert(c.at, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def anthropic_ended(wire: list[Any]) -> bool:
    return any(w.get("type") == "message_stop" for w in wire)


# ------------------------------------------------------------------------------------ openai-responses


@st.composite
def openai_stream(draw: Any) -> Script:
    """Message, reasoning and function_call items; arguments streamed, sent only whole in
    `function_call_arguments.done` or only with the finished item; text the deltas did not carry; several
    summary parts."""
    wire: list[dict] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "response": {"id": "resp_1", "status": "in_progress"}},
    ]
    expected: list[dict] = []
    kinds = draw(st.lists(st.sampled_from(["text", "reasoning", "call", "builtin"]), max_size=5))
    for index, kind in enumerate(kinds):
        if kind == "text":
            item_id = f"msg_{index}"
            text = draw(wire_text)
            chunks = utf16_split(draw, text)
            streamed = chunks[: draw(st.integers(0, len(chunks)))]  # the rest arrives only in the finished item
            ids = {"item_id": item_id, "output_index": index, "content_index": 0}
            wire.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {
                        "id": item_id,
                        "type": "message",
                        "status": "in_progress",
                        "role": "assistant",
                        "content": [],
                    },
                }
            )
            wire.append({"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}, **ids})
            wire += [{"type": "response.output_text.delta", "delta": c, **ids} for c in streamed]
            wire.append({"type": "response.output_text.done", "text": text, **ids})
            item = {
                "id": item_id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            wire.append({"type": "response.output_item.done", "output_index": index, "item": item})
            expected.append(
                {
                    "type": "text",
                    "text": valid_text(text),
                    "textSignature": json.dumps({"v": 1, "id": item_id}, separators=(",", ":")),
                }
            )
        elif kind == "reasoning":
            item_id = f"rs_{index}"
            summaries = draw(st.lists(st.text(min_size=1, max_size=10), max_size=3))
            wire.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {"id": item_id, "type": "reasoning", "summary": []},
                }
            )
            for s_index, summary in enumerate(summaries):
                ids = {"item_id": item_id, "output_index": index, "summary_index": s_index}
                wire.append(
                    {
                        "type": "response.reasoning_summary_part.added",
                        "part": {"type": "summary_text", "text": ""},
                        **ids,
                    }
                )
                wire += [
                    {"type": "response.reasoning_summary_text.delta", "delta": c, **ids} for c in split(draw, summary)
                ]
                wire.append({"type": "response.reasoning_summary_text.done", "text": summary, **ids})
                wire.append(
                    {
                        "type": "response.reasoning_summary_part.done",
                        "part": {"type": "summary_text", "text": summary},
                        **ids,
                    }
                )
            item = {
                "id": item_id,
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": s} for s in summaries],
                "encrypted_content": draw(st.text(alphabet="abcdef0123456789", max_size=8)) or None,
            }
            wire.append({"type": "response.output_item.done", "output_index": index, "item": item})
            expected.append(
                {
                    "type": "thinking",
                    "thinking": "\n\n".join(summaries),
                    "thinkingSignature": json.dumps(item, ensure_ascii=False, separators=(",", ":")),
                }
            )
        elif kind == "call":
            item_id, call_id = f"fc_{index}", f"call_{index}"
            args = draw(arguments)
            text = json.dumps(args, ensure_ascii=False) if args or draw(st.booleans()) else ""
            how = draw(st.sampled_from(["deltas", "done", "item"]))
            ids = {"item_id": item_id, "output_index": index}
            wire.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {
                        "id": item_id,
                        "type": "function_call",
                        "status": "in_progress",
                        "call_id": call_id,
                        "name": "tool",
                        "arguments": "",
                    },
                }
            )
            if how == "deltas":
                wire += [
                    {"type": "response.function_call_arguments.delta", "delta": f, **ids}
                    for f in utf16_split(draw, text)
                ]
            if how != "item":
                wire.append({"type": "response.function_call_arguments.done", "arguments": text, **ids})
            wire.append(
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "item": {
                        "id": item_id,
                        "type": "function_call",
                        "status": "completed",
                        "call_id": call_id,
                        "name": "tool",
                        "arguments": text,
                    },
                }
            )
            expected.append({"type": "toolCall", "id": f"{call_id}|{item_id}", "name": "tool", "arguments": args})
        else:  # a built-in tool item: not client content, skipped with its events
            item_id = f"ws_{index}"
            wire.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {"id": item_id, "type": "web_search_call"},
                }
            )
            wire.append({"type": "response.web_search_call.searching", "item_id": item_id, "output_index": index})
            wire.append(
                {
                    "type": "response.output_item.done",
                    "output_index": index,
                    "item": {"id": item_id, "type": "web_search_call"},
                }
            )
    usage = {"input_tokens": draw(st.integers(0, 5000)), "output_tokens": draw(st.integers(0, 5000))}
    cached = draw(st.integers(0, usage["input_tokens"]))
    usage["input_tokens_details"] = {"cached_tokens": cached}
    length = draw(st.booleans())
    if length:
        wire.append(
            {
                "type": "response.incomplete",
                "response": {
                    "id": "resp_1",
                    "status": "incomplete",
                    "usage": usage,
                    "incomplete_details": {"reason": "max_output_tokens"},
                },
            }
        )
    else:
        wire.append({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage}})
    has_calls = any(b["type"] == "toolCall" for b in expected)
    reason = "toolUse" if has_calls else "length" if length else "stop"
    return Script(wire, expected, reason, (usage["input_tokens"] - cached, usage["output_tokens"], cached))


def openai_frames(c: Corrupted) -> None:
    if c.mutation == "unknown":
        c.wire.insert(c.at, {"type": "response.mystery_event", "payload": [1, 2]})
    elif c.mutation == "garble":
        c.wire.insert(
            c.at,
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{c.seed % 5}",
                "output_index": c.seed % 5,
                "delta": "}{",
            },
        )
    elif c.mutation == "late":
        c.wire += [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_0",
                "output_index": 0,
                "content_index": 0,
                "delta": "late",
            },
            {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
        ]
    elif c.mutation == "error_event":
        c.wire.insert(
            c.at, {"type": "error", "code": "server_error", "message": "The server had an error", "param": None}
        )
    elif c.mutation == "orphan":  # an item finished that was never added, with odd contents
        seed = c.seed
        c.wire.insert(
            c.at,
            {
                "type": "response.output_item.done",
                "output_index": 9,
                "item": {
                    "id": f"x_{seed}",
                    "type": ["message", "function_call", "reasoning"][seed % 3],
                    "call_id": "c",
                    "name": "n",
                    "arguments": ["{}", "[1]", "", '{"a":'][seed % 4],
                    "content": [{"type": "refusal", "refusal": "no"}] if seed % 2 else [],
                    "summary": [{"type": "summary_text", "text": "s"}],
                },
            },
        )


def openai_ended(wire: list[Any]) -> bool:
    return any(w.get("type") in ("response.completed", "response.incomplete", "response.failed") for w in wire)


# ------------------------------------------------------------------------------- google-generative-ai

GOOGLE_FINISHES = {"STOP": "stop", "MAX_TOKENS": "length"}

signatures = st.binary(min_size=1, max_size=9).map(lambda b: base64.b64encode(b).decode())


def sdk(wire: dict[str, Any]) -> Any:
    """A wire chunk as the SDK hands it to the adapter (signatures then arrive as bytes)."""
    return types.GenerateContentResponse._from_response(
        response=models._GenerateContentResponse_from_mldev(wire, None, None), kwargs={}
    )


@st.composite
def google_parts(draw: Any) -> list[dict[str, Any]]:
    """The parts of a turn: text, thought and functionCall parts, empty ones, signatures on any part."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["text", "thought", "call"]))
        part: dict[str, Any]
        if kind == "call":
            call: dict[str, Any] = {"name": draw(st.sampled_from(["get_weather", "lookup"]))}
            if draw(st.booleans()):
                call["args"] = draw(arguments)
            if draw(st.booleans()):
                call["id"] = f"call_{len(out)}"
            part = {"functionCall": call}
        else:
            part = {"text": draw(st.sampled_from(["", draw(wire_text)]))}  # halves of a surrogate pair too
            if kind == "thought":
                part["thought"] = True
        if draw(st.integers(0, 3)) == 0:
            part["thoughtSignature"] = draw(signatures)
        out.append(part)
    return out


def google_content(all_parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A small model of the mapping (same rules as Gemini's clients): runs of one kind merge; a signature goes
    to the open block of its kind, or to the next block of that kind; a call closes the open block."""
    content: list[dict[str, Any]] = []
    open_kind: str | None = None
    pending: dict[str, str] = {}
    for part in all_parts:
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            open_kind = None
            call = part["functionCall"]
            block = {
                "type": "toolCall",
                "id": call.get("id"),
                "name": call["name"],
                "arguments": call.get("args") or {},
            }
            if signature:
                block["thoughtSignature"] = signature
            content.append(block)
            continue
        kind = "thinking" if part.get("thought") else "text"
        if part["text"]:
            if open_kind != kind:
                open_kind = kind
                content.append({"type": kind, kind: ""})
                if kind in pending:
                    content[-1]["textSignature" if kind == "text" else "thinkingSignature"] = pending.pop(kind)
            content[-1][kind] += part["text"]
        if signature:
            if open_kind == kind:
                content[-1]["textSignature" if kind == "text" else "thinkingSignature"] = signature
            else:
                pending[kind] = signature
    for block in content:
        if block["type"] in ("text", "thinking"):
            block[block["type"]] = valid_text(block[block["type"]])
    return content


@st.composite
def google_stream(draw: Any) -> Script:
    """The parts spread over chunks, finishReason on the last content chunk or on a chunk of its own."""
    all_parts = draw(google_parts())
    chunks: list[list[dict[str, Any]]] = []
    rest = list(all_parts)
    while rest:
        n = draw(st.integers(1, 3))
        chunks.append(rest[:n])
        rest = rest[n:]
    prompt = draw(st.integers(0, 5000))
    cached = draw(st.integers(0, prompt))
    output, thoughts = draw(st.integers(0, 5000)), draw(st.integers(0, 500))
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "thoughtsTokenCount": thoughts,
        "cachedContentTokenCount": cached,
        "totalTokenCount": prompt + output + thoughts,
    }
    finish = draw(st.sampled_from(sorted(GOOGLE_FINISHES)))
    if not chunks or draw(st.booleans()):
        chunks.append([{"text": ""}])  # the finish on a chunk of its own (as Gemini 3 sends it)
    wire = []
    for i, chunk_parts in enumerate(chunks):
        candidate: dict[str, Any] = {"content": {"parts": chunk_parts, "role": "model"}, "index": 0}
        if i == len(chunks) - 1:
            candidate["finishReason"] = finish
        wire.append(
            {
                "candidates": [candidate],
                "usageMetadata": usage if i == len(chunks) - 1 else {"promptTokenCount": prompt},
                "modelVersion": "fuzz-model",
                "responseId": "r1",
            }
        )
    content = google_content(all_parts)
    reason = "toolUse" if any(b["type"] == "toolCall" for b in content) else GOOGLE_FINISHES[finish]
    return Script(wire, content, reason, (prompt - cached, output + thoughts, cached))


def google_frames(c: Corrupted) -> None:
    seed, at = c.seed, c.at
    if c.mutation == "unknown":
        c.wire.insert(
            at,
            {
                "candidates": [{"content": {"parts": [{"futurePart": {"x": 1}}, {"executableCode": {"code": "1"}}]}}],
                "futureField": True,
            },
        )
    elif c.mutation == "odd_parts":  # valid to the SDK, odd for a client: empty candidates, nameless calls, no content
        c.wire.insert(
            at,
            [
                {"candidates": []},
                {"candidates": [{"index": 0}]},
                {
                    "candidates": [
                        {
                            "content": {
                                "parts": [
                                    {"functionCall": {}},
                                    {"text": "", "thought": True, "thoughtSignature": "c2ln"},
                                ]
                            }
                        }
                    ]
                },
                {},
            ][seed % 4],
        )
    elif c.mutation == "bad_finish":
        c.wire.insert(
            at,
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": "x"}]},
                        "index": 0,
                        "finishReason": ["SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL", "OTHER"][seed % 4],
                        "finishMessage": "stopped",
                    }
                ]
            },
        )
    elif c.mutation == "blocked":
        c.wire.insert(at, {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    elif c.mutation == "late":
        c.wire += [{"candidates": [{"content": {"parts": [{"text": "late"}]}, "finishReason": "STOP", "index": 0}]}]
    elif c.mutation == "error_chunk":  # the SDK raises on an error chunk: as a transport failure at that point
        c.wire = c.wire[:at]
        c.fail_with = ConnectionError("error chunk")


def google_ended(wire: list[Any]) -> bool:
    return any((w.get("candidates") or [{}])[0].get("finishReason") for w in wire)


def google_rules(terminal: dict[str, Any], c: Corrupted, script: Script) -> None:
    if c.mutation == "bad_finish" and not any(
        (w.get("candidates") or [{}])[0].get("finishReason") in GOOGLE_FINISHES for w in c.wire[: c.at]
    ):
        assert terminal["type"] == "error"  # an error finish reason is never a success


# ---------------------------------------------------------------------------------- openai-completions


def _chunk(delta: Any = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": choices, **extra}


@st.composite
def chat_stream(draw: Any) -> Script:
    """Text as a string or Mistral's typed parts, thinking in `reasoning_content` / `reasoning` /
    `reasoning_details`, tool calls by index or without one (Mistral) in fragments or whole, usage in the
    finish chunk or a trailing one."""
    wire = [_chunk({"role": "assistant", "content": draw(st.sampled_from(["", None]))})]
    expected: list[dict] = []
    kinds = draw(st.lists(st.sampled_from(["text", "thinking", "call"]), max_size=5))
    index = 0
    previous = None
    for kind in kinds:
        if kind == previous and kind != "call":
            continue  # two runs of one kind in a row are one block on this wire
        previous = kind
        if kind == "text":
            text = draw(wire_text.filter(bool))
            typed = draw(st.booleans())  # Mistral's typed content parts, else a plain string
            wire += [
                _chunk({"content": [{"type": "text", "text": c}] if typed else c}) for c in utf16_split(draw, text) if c
            ]
            expected.append({"type": "text", "text": valid_text(text)})
        elif kind == "thinking":
            text = draw(wire_text.filter(bool))
            field = draw(st.sampled_from(["reasoning_content", "reasoning", "details"]))
            for c in (c for c in utf16_split(draw, text) if c):
                if field == "details":
                    wire.append(_chunk({"reasoning_details": [{"type": "reasoning.text", "text": c}]}))
                else:
                    wire.append(_chunk({field: c, "content": None}))
            block = {"type": "thinking", "thinking": valid_text(text)}
            if field != "details":
                block["thinkingSignature"] = field
            expected.append(block)
        else:
            args = draw(arguments)
            text = json.dumps(args, ensure_ascii=False)
            whole = draw(st.booleans())
            indexed = draw(st.booleans())  # Mistral sends no index: a new id starts a call, no id continues it
            by_index = {"index": index} if indexed else {}
            first = {
                **by_index,
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": "tool", "arguments": text if whole else ""},
            }
            wire.append(_chunk({"tool_calls": [first]}))
            if not whole:
                wire += [
                    _chunk({"tool_calls": [{**by_index, "function": {"arguments": f}}]})
                    for f in utf16_split(draw, text)
                ]
            expected.append({"type": "toolCall", "id": f"call_{index}", "name": "tool", "arguments": args})
            index += 1
    prompt, completion = draw(st.integers(0, 5000)), draw(st.integers(0, 5000))
    cached = draw(st.integers(0, prompt))
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    finish = draw(st.sampled_from(["stop", "length"])) if not index else "tool_calls"
    if draw(st.booleans()):
        wire.append(_chunk({}, finish, usage=usage))
    else:
        wire += [_chunk({}, finish), _chunk(None, usage=usage)]
    reason = "toolUse" if index else finish
    return Script(wire, expected, reason, (prompt - cached, completion, cached))


CHAT_ERROR_FINISHES = ["content_filter", "mystery_reason"]


def chat_frames(c: Corrupted) -> None:
    if c.mutation == "unknown":
        c.wire.insert(c.at, {"object": "chat.completion.mystery", "payload": [1, 2]})
    elif c.mutation == "garble":
        c.wire.insert(c.at, _chunk({"tool_calls": [{"index": c.seed % 3, "function": {"arguments": "}{"}}]}))
    elif c.mutation == "late":
        c.wire += [_chunk({"content": "late"}), _chunk({}, "stop")]
    elif c.mutation == "error_event":
        c.wire.insert(c.at, {"error": {"message": "The server had an error", "type": "server_error"}})
    elif c.mutation == "interleave":  # a fragment for call 0 after call 1 began
        c.wire.insert(len(c.wire) - 1, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1"}}]}))
    elif c.mutation == "bad_finish":  # a finish reason that cannot be success, with usage so it settles there
        c.wire.insert(
            c.at,
            _chunk(
                {"content": "x"}, CHAT_ERROR_FINISHES[c.seed % 2], usage={"prompt_tokens": 1, "completion_tokens": 1}
            ),
        )


def chat_ended(wire: list[Any]) -> bool:
    return any((c.get("choices") or [{}])[0].get("finish_reason") for c in wire if isinstance(c, dict))


def chat_rules(terminal: dict[str, Any], c: Corrupted, script: Script) -> None:
    if c.mutation == "bad_finish":
        before = [chunk for chunk in c.wire[: c.at] if isinstance(chunk, dict)]
        finished = any((chunk.get("choices") or [{}])[0].get("finish_reason") for chunk in before)
        calls = any(((chunk.get("choices") or [{}])[0].get("delta") or {}).get("tool_calls") for chunk in before)
        if not finished and (c.seed % 2 == 0 or not calls):
            # content_filter is never a success; nor is an unknown reason, unless a completed call says toolUse
            assert terminal["type"] == "error"
    if terminal["type"] == "done":  # never a call with invented arguments
        made = [b for b in terminal["message"]["content"] if b["type"] == "toolCall"]
        assert all(b in script.content for b in made) or c.mutation in (
            "duplicate",
            "swap",
            "drop",
            "garble",
            "interleave",
            "bad_finish",
            "retype",
        )


# ------------------------------------------------------------------------------------ every vendor api


@dataclass(frozen=True)
class Vendor:
    """One vendor api under the fuzz: the provider the scripts play, how its streams are generated and
    corrupted, and what it must still hold to."""

    provider: str
    api: str
    translator: Callable[[], Any]
    streams: st.SearchStrategy[Script]
    mutations: tuple[str, ...]  # the vendor-neutral ones (tests/harness.py) and the vendor's own
    own_frames: Callable[[Corrupted], None]  # adds the vendor's own odd frames for its own mutations
    ended: Callable[[list[Any]], bool]  # whether the wire still carries the vendor's end of a stream
    throttles: tuple[int, ...] = (0, 2)  # a 2 ms window still holds and merges; 50 ms would cost real time
    as_sdk: tuple[bool, ...] = (False,)  # whether chunks may reach the adapter as the SDK's parsed objects
    rules: Callable[[dict[str, Any], Corrupted, Script], None] = lambda terminal, c, script: None


VENDORS = {
    "anthropic": Vendor(
        "anthropic",
        "anthropic-messages",
        AnthropicTranslator,
        anthropic_stream(),
        ("drop", "duplicate", "swap", "unknown", "truncate", "garble", "late", "transport", "error_event", "retype"),
        anthropic_frames,
        anthropic_ended,
        throttles=(0, 50),
    ),
    "openai": Vendor(
        "openai",
        "openai-responses",
        OpenAIResponsesTranslator,
        openai_stream(),
        (
            "drop",
            "duplicate",
            "swap",
            "unknown",
            "truncate",
            "garble",
            "late",
            "transport",
            "error_event",
            "orphan",
            "retype",
        ),
        openai_frames,
        openai_ended,
    ),
    "google": Vendor(
        "google",
        "google-generative-ai",
        GoogleTranslator,
        google_stream(),
        (
            "drop",
            "duplicate",
            "swap",
            "unknown",
            "truncate",
            "odd_parts",
            "bad_finish",
            "blocked",
            "late",
            "transport",
            "error_chunk",
            "retype",
        ),
        google_frames,
        google_ended,
        as_sdk=(False, True),
        rules=google_rules,
    ),
    "completions": Vendor(
        "compat",
        "openai-completions",
        ChatCompletionsTranslator,
        chat_stream(),
        (
            "drop",
            "duplicate",
            "swap",
            "unknown",
            "truncate",
            "garble",
            "late",
            "transport",
            "error_event",
            "interleave",
            "bad_finish",
            "retype",
        ),
        chat_frames,
        chat_ended,
        rules=chat_rules,
    ),
}


def _feed(wire: list[Any], as_sdk: bool) -> list[Any]:
    return [sdk(w) for w in wire] if as_sdk else wire


def _without_generated_ids(content: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls without a vendor id get one made up by the gateway: compare those ids by shape only."""
    out = []
    for got, want in zip(content, expected):
        if got["type"] == "toolCall" and want["id"] is None:
            assert got["id"].startswith(f"{got['name']}_")
            out.append({**got, "id": None})
        else:
            out.append(got)
    return out


@pytest.mark.parametrize("vendor", VENDORS.values(), ids=VENDORS)
@fuzz_valid
@given(data=st.data())
def test_valid_streams_normalize_exactly(vendor: Vendor, data: st.DataObject) -> None:
    script = data.draw(vendor.streams, label="script")
    as_sdk = data.draw(st.sampled_from(vendor.as_sdk), label="as_sdk")
    throttle = data.draw(st.sampled_from(vendor.throttles), label="throttle")
    provider = ScriptedProvider(vendor.provider, vendor.api, vendor.translator, _feed(script.wire, as_sdk))
    events, job = run_script(provider, throttle_ms=throttle)
    check_events(events)
    terminal = events[-1]
    assert terminal["type"] == "done", terminal.get("errorMessage")
    content = terminal["message"]["content"]
    assert len(content) == len(script.content)
    assert _without_generated_ids(content, script.content) == script.content
    assert terminal["reason"] == script.reason
    if script.tokens is not None:
        usage = terminal["usage"]
        assert (usage["input"], usage["output"], usage["cacheRead"]) == script.tokens
    assert provider.closed
    assert [a.outcome for a in job.attempts] == ["done"]


@pytest.mark.parametrize("vendor", VENDORS.values(), ids=VENDORS)
@fuzz_corrupt
@given(data=st.data())
def test_corrupted_streams_keep_every_invariant(vendor: Vendor, data: st.DataObject) -> None:
    script = data.draw(vendor.streams, label="script")
    mutation = data.draw(st.sampled_from(vendor.mutations), label="mutation")
    seed = data.draw(st.integers(0, 10_000), label="seed")
    as_sdk = data.draw(st.sampled_from(vendor.as_sdk), label="as_sdk")
    throttle = data.draw(st.sampled_from(vendor.throttles), label="throttle")
    c = Corrupted(*corrupt(script.wire, mutation, seed), mutation=mutation, seed=seed)
    vendor.own_frames(c)
    if mutation == "retype":
        as_sdk = False  # the SDK's typed objects refuse hostile values before the adapter sees them
    provider = ScriptedProvider(vendor.provider, vendor.api, vendor.translator, _feed(c.wire, as_sdk), c.fail_with)
    terminal, job = run_corrupted(provider, throttle_ms=throttle)
    if mutation in ("truncate", "transport") and not vendor.ended(c.wire):
        assert terminal["type"] == "error"
    vendor.rules(terminal, c, script)
    assert provider.closed
    assert job.turn.settled and job.attempts and job.attempts[-1].outcome == job.turn.outcome
