"""Property-based fuzzing of the Anthropic adapter + dispatcher + event stream with generated wire streams.

Valid streams must normalize exactly; corrupted ones (dropped, duplicated, reordered or unknown events,
garbled tool JSON, truncation, transport failure, frames after the end) must still satisfy every
invariant of the conformance checker: one terminal event, ordered blocks, text = deltas, args = deltas.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from app.providers.anthropic.events import AnthropicTranslator
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

STOPS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "length",
    "max_tokens": "length",
    "tool_use": "toolUse",
}


@st.composite
def anthropic_stream(draw):
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
    stop = draw(st.sampled_from(sorted(STOPS)))
    wire.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop},
            "usage": {"output_tokens": draw(st.integers(0, 5000))},
        }
    )
    wire.append({"type": "message_stop"})
    return wire, expected, stop


@fuzz_valid
@given(anthropic_stream(), st.sampled_from([0, 50]))
def test_valid_streams_normalize_exactly(stream, throttle):
    wire, expected, stop = stream
    provider = ScriptedProvider("anthropic", "anthropic-messages", AnthropicTranslator, wire)
    events, job = run_script(provider, throttle_ms=throttle)
    check_events(events)
    terminal = events[-1]
    assert terminal["type"] == "done", terminal.get("errorMessage")
    assert terminal["message"]["content"] == expected
    has_calls = any(b["type"] == "toolCall" for b in expected)
    assert terminal["reason"] == ("toolUse" if has_calls else "stop" if STOPS[stop] == "toolUse" else STOPS[stop])
    assert provider.closed


MUTATIONS = ["drop", "duplicate", "swap", "unknown", "truncate", "garble", "late", "transport", "error_event", "retype"]


@fuzz_corrupt
@given(anthropic_stream(), st.sampled_from(MUTATIONS), st.integers(0, 10_000), st.sampled_from([0, 50]))
def test_corrupted_streams_keep_every_invariant(stream, mutation, seed, throttle):
    wire, _, _ = stream
    wire, fail_with, at = corrupt(wire, mutation, seed)
    if mutation == "unknown":
        wire.insert(at, {"type": "mystery_event", "payload": [1, 2]})
    elif mutation == "garble":
        wire.insert(
            at,
            {
                "type": "content_block_delta",
                "index": seed % 4,
                "delta": {"type": "input_json_delta", "partial_json": "}{"},
            },
        )
    elif mutation == "late":
        wire += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "late"}},
            {"type": "message_stop"},
        ]
    elif mutation == "error_event":
        wire.insert(at, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    provider = ScriptedProvider("anthropic", "anthropic-messages", AnthropicTranslator, wire, fail_with)
    terminal, _ = run_corrupted(provider, throttle_ms=throttle)
    if mutation in ("truncate", "transport") and not any(w.get("type") == "message_stop" for w in wire):
        assert terminal["type"] == "error"
    assert provider.closed
