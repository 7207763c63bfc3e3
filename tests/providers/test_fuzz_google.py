"""Property-based fuzzing of the Gemini adapter + dispatcher + event stream (like test_fuzz_anthropic).

Chunks are generated as wire JSON and fed either as dicts or as the SDK's parsed `GenerateContentResponse`
(what the adapter receives in production; signatures then arrive as bytes). Valid streams (text, thought and
functionCall parts spread over chunks, empty parts, signatures on any part, finishReason on the last content
chunk or on a chunk of its own) must normalize exactly; corrupted ones (dropped, duplicated, reordered or
unknown chunks, odd parts, error finish reasons, blocked prompts, truncation, transport failure, chunks
after the end) must keep every invariant of the conformance checker and never end in an internal error.
`FUZZ_EXAMPLES=N` raises the number of examples (e.g. for a soak run).
"""

from __future__ import annotations

import base64
from typing import Any

from google.genai import models, types
from hypothesis import given
from hypothesis import strategies as st

from app.providers.google.events import GoogleTranslator
from tests.conformance import check_events
from tests.harness import (
    ScriptedProvider,
    arguments,
    corrupt,
    fuzz_corrupt,
    fuzz_valid,
    run_corrupted,
    run_script,
    valid_text,
    wire_text,
)

FINISHES = {"STOP": "stop", "MAX_TOKENS": "length"}

signatures = st.binary(min_size=1, max_size=9).map(lambda b: base64.b64encode(b).decode())


def sdk(wire: dict[str, Any]) -> Any:
    """A wire chunk as the SDK hands it to the adapter."""
    return types.GenerateContentResponse._from_response(
        response=models._GenerateContentResponse_from_mldev(wire, None, None), kwargs={}
    )


@st.composite
def parts(draw):
    """The parts of a turn, and the content the gateway must make of them (same rules as Gemini's clients)."""
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


def expected_content(all_parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A small model of the mapping: runs of one kind merge; a signature goes to the open block of its kind, or
    to the next block of that kind; a call closes the open block."""
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


@st.composite
def google_stream(draw):
    all_parts = draw(parts())
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
    finish = draw(st.sampled_from(sorted(FINISHES)))
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
    return wire, expected_content(all_parts), FINISHES[finish], (prompt - cached, output + thoughts, cached)


def _feed(wire: list[dict[str, Any]], as_sdk: bool) -> list[Any]:
    return [sdk(w) for w in wire] if as_sdk else wire


@fuzz_valid
@given(google_stream(), st.booleans(), st.sampled_from([0, 2]))  # a 2 ms window still holds and merges
def test_valid_streams_normalize_exactly(stream, as_sdk, throttle):
    wire, expected, stop, tokens = stream
    provider = ScriptedProvider("google", "google-generative-ai", GoogleTranslator, _feed(wire, as_sdk))
    events, job = run_script(provider, throttle_ms=throttle)
    check_events(events)
    terminal = events[-1]
    assert terminal["type"] == "done", terminal.get("errorMessage")
    content = terminal["message"]["content"]
    assert len(content) == len(expected)
    assert _without_generated_ids(content, expected) == expected
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
    "odd_parts",
    "bad_finish",
    "blocked",
    "late",
    "transport",
    "error_chunk",
    "retype",
]


@fuzz_corrupt
@given(google_stream(), st.sampled_from(MUTATIONS), st.integers(0, 10_000), st.booleans(), st.sampled_from([0, 2]))
def test_corrupted_streams_keep_every_invariant(stream, mutation, seed, as_sdk, throttle):
    wire, _, _, _ = stream
    wire, fail_with, at = corrupt(wire, mutation, seed)
    if mutation == "unknown":
        wire.insert(
            at,
            {
                "candidates": [{"content": {"parts": [{"futurePart": {"x": 1}}, {"executableCode": {"code": "1"}}]}}],
                "futureField": True,
            },
        )
    elif mutation == "odd_parts":  # valid to the SDK, odd for a client: empty candidates, nameless calls, no content
        wire.insert(
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
    elif mutation == "bad_finish":
        wire.insert(
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
    elif mutation == "blocked":
        wire.insert(at, {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    elif mutation == "late":
        wire += [{"candidates": [{"content": {"parts": [{"text": "late"}]}, "finishReason": "STOP", "index": 0}]}]
    elif mutation == "error_chunk":  # the SDK raises on an error chunk: as a transport failure at that point
        wire = wire[:at]
        fail_with = ConnectionError("error chunk")
    if mutation == "retype":
        as_sdk = False  # the SDK's typed objects refuse hostile values before the adapter sees them
    provider = ScriptedProvider("google", "google-generative-ai", GoogleTranslator, _feed(wire, as_sdk), fail_with)
    terminal, job = run_corrupted(provider, throttle_ms=throttle)
    if mutation in ("truncate", "transport") and not any(
        (w.get("candidates") or [{}])[0].get("finishReason") for w in wire
    ):
        assert terminal["type"] == "error"
    if mutation == "bad_finish" and not any(
        (w.get("candidates") or [{}])[0].get("finishReason") in FINISHES for w in wire[:at]
    ):
        assert terminal["type"] == "error"  # an error finish reason is never a success
    assert provider.closed
    assert job.turn.settled and job.attempts and job.attempts[-1].outcome == job.turn.outcome
