"""The Gemini translator fed with wire chunks (dicts as on the wire, and the SDK's parsed objects), and the
request builder's pure parts."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from google.genai import models, types

from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import ProviderError
from app.providers.google.events import GoogleTranslator
from app.providers.handoff import Target
from app.providers.google.request import API, SKIP_SIGNATURE, build_request, convert_contents, thinking_config

SAMPLES = Path(__file__).parents[1] / "wire_samples"


def chunk(*parts, finish=None, usage=None, **candidate):
    c = {"content": {"parts": list(parts), "role": "model"}, "index": 0, **candidate}
    if finish:
        c["finishReason"] = finish
    data = {"candidates": [c]}
    if usage is not None:
        data["usageMetadata"] = usage
    return data


def run(chunks):
    t = GoogleTranslator()
    events = []
    for c in chunks:
        events += t.feed(c)
    events += t.end()
    return events


def sdk_chunks(name):
    """A recorded sample parsed by the SDK's own response converter, as the adapter receives it."""
    raw = (SAMPLES / f"{name}.sse").read_bytes().decode()
    for frame in raw.split("\r\n\r\n"):
        if frame.startswith("data: "):
            wire = json.loads(frame[len("data: ") :])
            yield (
                wire,
                types.GenerateContentResponse._from_response(
                    response=models._GenerateContentResponse_from_mldev(wire, None, None), kwargs={}
                ),
            )


def test_block_switches_close_the_open_block_and_signatures_stay_on_their_block():
    events = run(
        [
            chunk({"text": "plan", "thought": True}),
            chunk({"text": " more", "thought": True, "thoughtSignature": "VEhJTks="}),
            chunk({"text": "Hello", "thoughtSignature": "VEVYVA=="}),
            chunk({"text": ""}, finish="STOP"),
        ]
    )
    assert events == [
        {"type": "thinking_start"},
        {"type": "thinking_delta", "delta": "plan"},
        {"type": "thinking_delta", "delta": " more"},
        {"type": "thinking_end", "signature": "VEhJTks="},
        {"type": "text_start"},
        {"type": "text_delta", "delta": "Hello"},
        {"type": "text_end", "signature": "VEVYVA=="},
        {"type": "finish", "reason": "stop"},
    ]


def test_signature_on_an_empty_part_goes_to_the_open_block_or_the_next_one():
    events = run(
        [
            chunk({"text": "", "thoughtSignature": "RUFSTFk="}),  # nothing open yet: kept for the next text block
            chunk({"text": "Hi"}),
            chunk({"text": "", "thought": True, "thoughtSignature": "TE9TVA=="}),  # no thinking block follows: dropped
            chunk(finish="STOP"),
        ]
    )
    assert events == [
        {"type": "text_start"},
        {"type": "text_delta", "delta": "Hi"},
        {"type": "text_end", "signature": "RUFSTFk="},
        {"type": "finish", "reason": "stop"},
    ]


def test_function_calls_get_unique_ids_args_and_signatures():
    events = run(
        [
            chunk(
                {"text": "Checking."},
                {"functionCall": {"name": "add", "args": {"b": 3, "a": 2}}, "thoughtSignature": "U0lH"},
            ),
            chunk(
                {"functionCall": {"name": "add"}},
                {"functionCall": {"name": "now", "id": "fixed"}},
                {"functionCall": {"name": "now", "id": "fixed"}},
                finish="STOP",
            ),
        ]
    )
    types_ = [e["type"] for e in events]
    assert types_ == ["text_start", "text_delta", "text_end"] + [
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    ] * 4 + ["finish"]
    starts = [e for e in events if e["type"] == "toolcall_start"]
    deltas = [e["delta"] for e in events if e["type"] == "toolcall_delta"]
    ends = [e for e in events if e["type"] == "toolcall_end"]
    assert deltas == ['{"b":3,"a":2}', "{}", "{}", "{}"]
    assert ends[0] == {"type": "toolcall_end", "thoughtSignature": "U0lH"} and ends[1] == {"type": "toolcall_end"}
    ids = [s["id"] for s in starts]
    assert ids[0].startswith("add_1_") and ids[1].startswith("add_2_") and ids[2] == "fixed"
    assert ids[3].startswith("now_4_")  # a repeated vendor id is replaced
    assert len(set(ids)) == 4


def test_usage_latest_wins_and_cache_is_not_counted_twice():
    t = GoogleTranslator()
    first = t.feed(chunk({"text": "a"}, usage={"promptTokenCount": 100, "totalTokenCount": 100}))
    last = t.feed(
        chunk(
            {"text": "b"},
            finish="MAX_TOKENS",
            usage={
                "promptTokenCount": 100,
                "cachedContentTokenCount": 60,
                "candidatesTokenCount": 7,
                "thoughtsTokenCount": 5,
            },
        )
    )
    assert first[-1] == {"type": "usage", "input": 100, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    assert last[-3:] == [
        {"type": "usage", "input": 40, "output": 12, "cacheRead": 60, "cacheWrite": 0, "reasoning": 5},
        {"type": "text_end"},
        {"type": "finish", "reason": "length"},
    ]


def test_the_same_counts_chunk_after_chunk_are_one_usage_event_and_still_checked():
    """`usageMetadata` comes on every chunk and the turn prices each usage event, so counts equal to the
    previous chunk's are not sent again. A malformed count still fails the chunk."""
    t = GoogleTranslator()
    usage = {"promptTokenCount": 9, "totalTokenCount": 9}
    events = [t.feed(chunk({"text": piece}, usage=dict(usage))) for piece in ("a", "b", "c")]
    assert [e for e in events[0] if e["type"] == "usage"] == [
        {"type": "usage", "input": 9, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    ]
    assert events[1] == [{"type": "text_delta", "delta": "b"}]
    assert events[2] == [{"type": "text_delta", "delta": "c"}]
    grown = t.feed(chunk({"text": "d"}, usage={**usage, "candidatesTokenCount": 4}))
    assert grown[-1] == {"type": "usage", "input": 9, "output": 4, "cacheRead": 0, "cacheWrite": 0}
    with pytest.raises(ProviderError, match="promptTokenCount"):
        t.feed(chunk({"text": "e"}, usage={**usage, "promptTokenCount": "nine"}))


@pytest.mark.parametrize(
    "reason",
    [
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "LANGUAGE",
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "OTHER",
        "FINISH_REASON_UNSPECIFIED",
    ],
)
def test_every_other_finish_reason_is_an_error_even_after_a_call(reason):
    t = GoogleTranslator()
    t.feed(chunk({"functionCall": {"name": "f", "args": {}}}))
    # The finishing chunk's own parts are delivered first; the error is raised when the body ends.
    assert t.feed(chunk({"text": "Partial"}, finish=reason, finishMessage="why")) == [
        {"type": "text_start"},
        {"type": "text_delta", "delta": "Partial"},
    ]
    with pytest.raises(ProviderError) as info:
        t.end()
    assert info.value.message == f"stopped: finishReason={reason}: why"  # not "truncated"
    # A safety stop is a refusal (typed, so doors can tell it from a vendor failure); the rest are stops the
    # gateway cannot present as success.
    refused = reason in ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII")
    assert info.value.kind == ("refusal" if refused else "stop_reason")
    with pytest.raises(ProviderError, match="stopped"):
        t.feed(chunk({"text": "late"}))  # a frame after it raises the same error


def test_blocked_prompt_and_truncation_are_errors():
    with pytest.raises(ProviderError, match="blocked the prompt: blockReason=SAFETY"):
        GoogleTranslator().feed({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}})
    t = GoogleTranslator()
    assert t.feed(chunk({"text": "partial"})) == [{"type": "text_start"}, {"type": "text_delta", "delta": "partial"}]
    with pytest.raises(ProviderError, match="truncated") as info:
        t.end()
    assert info.value.kind == "truncated"


@pytest.mark.parametrize(
    "name",
    [
        "gemini-thought-parts-text",
        "gemini-tools-parallel-split",
        "gemini-3-text-thought-signature",
        "gemini-3-tool-id-empty-args",
        "gemini-text-usage-growing",
        "gemini-tool-no-id",
    ],
)
def test_sdk_objects_and_wire_dicts_translate_alike(name):
    def strip_ids(events):
        return [{**e, "id": e["id"].split("_")[0] if e["type"] == "toolcall_start" else None} for e in events]

    pairs = list(sdk_chunks(name))
    from_wire = run([w for w, _ in pairs])
    from_sdk = run([o for _, o in pairs])
    assert strip_ids(from_sdk) == strip_ids(from_wire)
    assert from_sdk[-1]["type"] == "finish"


def model(model_id: str) -> ModelInfo:
    return ModelInfo("google", model_id, Pricing())


@pytest.mark.parametrize(
    ("model_id", "effort", "expected"),
    [
        ("gemini-2.5-pro", "minimal", {"include_thoughts": True, "thinking_budget": 128}),
        ("gemini-2.5-pro", "high", {"include_thoughts": True, "thinking_budget": 32768}),
        ("gemini-2.5-flash", "medium", {"include_thoughts": True, "thinking_budget": 8192}),
        ("gemini-2.5-flash", "xhigh", {"include_thoughts": True, "thinking_budget": 24576}),
        ("gemini-2.0-flash", "low", {"include_thoughts": True, "thinking_budget": -1}),
        ("gemini-3-pro-preview", "minimal", {"include_thoughts": True, "thinking_level": "LOW"}),
        ("gemini-3-pro-preview", "medium", {"include_thoughts": True, "thinking_level": "HIGH"}),
        ("gemini-3-flash-preview", "minimal", {"include_thoughts": True, "thinking_level": "MINIMAL"}),
        ("gemini-3-flash-preview", "medium", {"include_thoughts": True, "thinking_level": "MEDIUM"}),
    ],
)
def test_thinking_config(model_id, effort, expected):
    assert thinking_config(model_id, effort) == expected


def test_no_reasoning_sends_no_thinking_config_and_no_sdk_follow_ups():
    params = build_request(
        model("gemini-2.5-flash"),
        Context.model_validate({"messages": [{"role": "user", "content": "hi"}]}),
        StreamOptions(),
    )
    assert "thinking_config" not in params["config"]
    assert params["config"]["automatic_continuation"] is False
    assert params["config"]["automatic_function_calling"] == {"disable": True}


def test_replay_signatures_by_model():
    history = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "provider": "anthropic",
                "api": "anthropic-messages",
                "model": "claude",
                "content": [
                    {"type": "thinking", "thinking": "elsewhere", "thinkingSignature": "c2ln"},
                    {"type": "toolCall", "id": "toolu_1", "name": "f", "arguments": {"x": 1}},
                ],
                "stopReason": "toolUse",
            },
            {"role": "toolResult", "toolCallId": "toolu_1", "content": [{"type": "text", "text": "ok"}]},
            {
                "role": "assistant",
                "provider": "google",
                "api": "google-generative-ai",
                "model": "gemini-3-pro-preview",
                "content": [
                    {"type": "thinking", "thinking": "mine", "thinkingSignature": "not base64!"},
                    {"type": "text", "text": "answer", "textSignature": "VEVYVA=="},
                ],
                "stopReason": "stop",
            },
            {"role": "user", "content": "again"},
        ]
    }
    contents = convert_contents(Context.model_validate(history), Target("google", API, "gemini-3-pro-preview"))
    other, result, mine = contents[1]["parts"], contents[2]["parts"], contents[3]["parts"]
    # From another model: thinking is plain text, the unsigned call gets the Gemini 3 placeholder.
    assert other[0] == {"text": "elsewhere"}
    assert other[1] == {
        "function_call": {"name": "f", "args": {"x": 1}},
        "thought_signature": base64.urlsafe_b64decode(SKIP_SIGNATURE),
    }
    assert base64.urlsafe_b64encode(other[1]["thought_signature"]).decode() == SKIP_SIGNATURE
    assert result == [{"function_response": {"name": "f", "response": {"output": "ok"}}}]  # name found from the call
    # Same model: a signature that is not base64 cannot be sent, so that thinking goes back as text.
    assert mine == [{"text": "mine"}, {"text": "answer", "thought_signature": b"TEXT"}]


def test_image_that_is_not_base64_is_a_clear_error():
    context = Context.model_validate(
        {"messages": [{"role": "user", "content": [{"type": "image", "data": "%%%", "mimeType": "image/png"}]}]}
    )
    with pytest.raises(ProviderError, match="not base64"):
        build_request(model("gemini-2.5-flash"), context, StreamOptions())


@pytest.mark.parametrize(
    "wire",
    [
        {"candidates": {"content": {}}},
        {"candidates": [{"content": {"parts": "hello"}}]},
        chunk({"text": 5}),
        chunk({"text": "hi"}, usage={"promptTokenCount": "ten"}),
    ],
)
def test_a_wire_chunk_of_the_wrong_shape_is_malformed(wire):
    # The adapter reads the wire JSON, not the SDK's typed objects (which refused such chunks): same outcome.
    with pytest.raises(ProviderError) as raised:
        GoogleTranslator().feed(wire)
    assert raised.value.kind == "malformed" and raised.value.retryable
