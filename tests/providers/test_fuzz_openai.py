"""Property-based fuzzing of the OpenAI Responses adapter + dispatcher + event stream (like test_fuzz_anthropic).

Generated valid wire streams (message, reasoning and function_call items; arguments streamed, sent only
whole in `function_call_arguments.done` or only with the finished item; text the deltas did not carry;
several summary parts) must normalize exactly. Corrupted ones (dropped, duplicated, reordered or unknown
events, garbled arguments, truncation, transport failure, frames after the end, error events) must keep
every invariant of the conformance checker and never end in an internal error.
`FUZZ_EXAMPLES=N` raises the number of examples (e.g. for a soak run).
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

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


@st.composite
def openai_stream(draw):
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
    tokens = (usage["input_tokens"] - cached, usage["output_tokens"], cached)
    return wire, expected, "length" if length else "stop", tokens


@fuzz_valid
@given(openai_stream(), st.sampled_from([0, 2]))  # a 2 ms window still holds and merges; 50 ms would cost real time
def test_valid_streams_normalize_exactly(stream, throttle):
    wire, expected, stop, tokens = stream
    provider = ScriptedProvider("openai", "openai-responses", OpenAIResponsesTranslator, wire)
    events, job = run_script(provider, throttle_ms=throttle)
    check_events(events)
    terminal = events[-1]
    assert terminal["type"] == "done", terminal.get("errorMessage")
    assert terminal["message"]["content"] == expected
    has_calls = any(b["type"] == "toolCall" for b in expected)
    assert terminal["reason"] == ("toolUse" if has_calls else stop)
    usage = terminal["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"]) == tokens
    assert provider.closed
    assert [a.outcome for a in job.attempts] == ["done"]


MUTATIONS = [
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
]


@fuzz_corrupt
@given(
    openai_stream(), st.sampled_from(MUTATIONS), st.integers(0, 10_000), st.sampled_from([0, 2])
)  # a 2 ms window still holds and merges; 50 ms would cost real time
def test_corrupted_streams_keep_every_invariant(stream, mutation, seed, throttle):
    wire, _, _, _ = stream
    wire, fail_with, at = corrupt(wire, mutation, seed)
    if mutation == "unknown":
        wire.insert(at, {"type": "response.mystery_event", "payload": [1, 2]})
    elif mutation == "garble":
        wire.insert(
            at,
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{seed % 5}",
                "output_index": seed % 5,
                "delta": "}{",
            },
        )
    elif mutation == "late":
        wire += [
            {
                "type": "response.output_text.delta",
                "item_id": "msg_0",
                "output_index": 0,
                "content_index": 0,
                "delta": "late",
            },
            {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
        ]
    elif mutation == "error_event":
        wire.insert(at, {"type": "error", "code": "server_error", "message": "The server had an error", "param": None})
    elif mutation == "orphan":  # an item finished that was never added, with odd contents
        wire.insert(
            at,
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
    provider = ScriptedProvider("openai", "openai-responses", OpenAIResponsesTranslator, wire, fail_with)
    terminal, job = run_corrupted(provider, throttle_ms=throttle)
    terminals = ("response.completed", "response.incomplete", "response.failed")
    if mutation in ("truncate", "transport") and not any(w.get("type") in terminals for w in wire):
        assert terminal["type"] == "error"
    assert provider.closed
    assert job.turn.settled and job.attempts and job.attempts[-1].outcome == job.turn.outcome
