"""Property-based fuzzing of the openai-completions adapter + dispatcher + event stream (like test_fuzz_openai).

Generated valid chunk streams (text as a string or Mistral's typed parts, thinking in `reasoning_content` /
`reasoning` / `reasoning_details`, tool calls by index or without one (Mistral) in fragments or whole, usage in
the finish chunk or a trailing one) must normalize exactly. Corrupted ones (dropped, duplicated, reordered or
unknown chunks, garbled arguments, truncation, transport failure, chunks after the end, error objects, a
finish reason that is not a success, any value replaced by one of the wrong type or size) must keep every
invariant of the conformance checker and never end in an internal error. `FUZZ_EXAMPLES=N` raises the number of examples.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from app.providers.openai_completions.events import ChatCompletionsTranslator
from tests.conformance import check_events
from tests.harness import (
    ScriptedProvider,
    arguments,
    corrupt,
    fuzz_corrupt,
    fuzz_valid,
    run_corrupted,
    run_script,
    utf16_split,
    valid_text,
    wire_text,
)


def _chunk(delta=None, finish=None, **extra):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": choices, **extra}


@st.composite
def chat_stream(draw):
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
    return wire, expected, reason, (prompt - cached, completion, cached)


@fuzz_valid
@given(chat_stream(), st.sampled_from([0, 2]))
def test_valid_streams_normalize_exactly(stream, throttle):
    wire, expected, reason, tokens = stream
    provider = ScriptedProvider("compat", "openai-completions", ChatCompletionsTranslator, wire)
    events, job = run_script(provider, throttle_ms=throttle)
    check_events(events)
    terminal = events[-1]
    assert terminal["type"] == "done", terminal.get("errorMessage")
    assert terminal["message"]["content"] == expected
    assert terminal["reason"] == reason
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
    "interleave",
    "bad_finish",
    "retype",
]
ERROR_FINISHES = ["content_filter", "mystery_reason"]


@fuzz_corrupt
@given(chat_stream(), st.sampled_from(MUTATIONS), st.integers(0, 10_000), st.sampled_from([0, 2]))
def test_corrupted_streams_keep_every_invariant(stream, mutation, seed, throttle):
    wire, expected, _, _ = stream
    wire, fail_with, at = corrupt(wire, mutation, seed)
    if mutation == "unknown":
        wire.insert(at, {"object": "chat.completion.mystery", "payload": [1, 2]})
    elif mutation == "garble":
        wire.insert(at, _chunk({"tool_calls": [{"index": seed % 3, "function": {"arguments": "}{"}}]}))
    elif mutation == "late":
        wire += [_chunk({"content": "late"}), _chunk({}, "stop")]
    elif mutation == "error_event":
        wire.insert(at, {"error": {"message": "The server had an error", "type": "server_error"}})
    elif mutation == "interleave":  # a fragment for call 0 after call 1 began
        wire.insert(len(wire) - 1, _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1"}}]}))
    elif mutation == "bad_finish":  # a finish reason that cannot be success, with usage so it settles there
        wire.insert(
            at, _chunk({"content": "x"}, ERROR_FINISHES[seed % 2], usage={"prompt_tokens": 1, "completion_tokens": 1})
        )
    provider = ScriptedProvider("compat", "openai-completions", ChatCompletionsTranslator, wire, fail_with)
    terminal, job = run_corrupted(provider, throttle_ms=throttle)
    if mutation in ("truncate", "transport") and not any(
        (c.get("choices") or [{}])[0].get("finish_reason") for c in wire if isinstance(c, dict)
    ):
        assert terminal["type"] == "error"
    if mutation == "bad_finish":
        before = [c for c in wire[:at] if isinstance(c, dict)]
        finished = any((c.get("choices") or [{}])[0].get("finish_reason") for c in before)
        calls = any(((c.get("choices") or [{}])[0].get("delta") or {}).get("tool_calls") for c in before)
        if not finished and (seed % 2 == 0 or not calls):
            # content_filter is never a success; nor is an unknown reason, unless a completed call says toolUse
            assert terminal["type"] == "error"
    if terminal["type"] == "done":  # never a call with invented arguments
        made = [b for b in terminal["message"]["content"] if b["type"] == "toolCall"]
        assert all(b in expected for b in made) or mutation in (
            "duplicate",
            "swap",
            "drop",
            "garble",
            "interleave",
            "bad_finish",
            "retype",
        )
    assert provider.closed
    assert job.turn.settled and job.attempts and job.attempts[-1].outcome == job.turn.outcome
