"""One conformance suite for all four apis: the same scenario gives the same normalized events.

Every scenario is played by the simulator in each vendor's own wire format and goes through that vendor's
official SDK and adapter (`compat` is a keyless `openai-completions` provider from tests/catalog.json). The
suite asserts the event sequence (runs of deltas collapsed) and the final message, and that all providers agree
with each other.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import marker, turn

PROVIDERS = ["anthropic", "openai", "google", "compat"]


def shape(events: list[dict]) -> list[str]:
    """Event types with each run of deltas collapsed to `<type>+`."""
    out: list[str] = []
    for event in events:
        kind = event["type"]
        if kind.endswith("_delta"):
            kind += "+"
            if out and out[-1] == kind:
                continue
        out.append(kind)
    return out


def content_summary(message: dict) -> list[tuple]:
    summary = []
    for block in message["content"]:
        if block["type"] == "toolCall":
            summary.append(("toolCall", block["name"], block["arguments"]))
        else:
            summary.append((block["type"], block[block["type"]]))
    return summary


SCENARIOS = {
    "text": (["start", "text_start", "text_delta+", "text_end", "done"], "stop"),
    "thinking": (
        ["start", "thinking_start", "thinking_delta+", "thinking_end", "text_start", "text_delta+", "text_end", "done"],
        "stop",
    ),
    "tools": (
        [
            "start",
            "text_start",
            "text_delta+",
            "text_end",
            "toolcall_start",
            "toolcall_delta+",
            "toolcall_end",
            "toolcall_start",
            "toolcall_delta+",
            "toolcall_end",
            "done",
        ],
        "toolUse",
    ),
    "tool-empty-args": (["start", "toolcall_start", "toolcall_delta+", "toolcall_end", "done"], "toolUse"),
    "max-tokens": (["start", "text_start", "text_delta+", "text_end", "done"], "length"),
    "error-mid-stream": (["start", "text_start", "text_delta+", "error"], "error"),
    "truncated": (["start", "text_start", "text_delta+", "error"], "error"),
    "unknown-event": (["start", "text_start", "text_delta+", "text_end", "done"], "stop"),
    "late-frames": (["start", "text_start", "text_delta+", "text_end", "done"], "stop"),
    "split-surrogates": (
        [
            "start",
            "thinking_start",
            "thinking_delta+",
            "thinking_end",
            "text_start",
            "text_delta+",
            "text_end",
            "toolcall_start",
            "toolcall_delta+",
            "toolcall_end",
            "done",
        ],
        "toolUse",
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_scenario_same_events_on_every_provider(gateway, scenario):
    expected_shape, expected_reason = SCENARIOS[scenario]
    prompt = f"conformance {scenario}"
    results = {}
    for provider in PROVIDERS:
        result = gateway.stream(turn(f"{provider}/{scenario}", prompt, options={"throttleMs": 0}))
        assert shape(result.events) == expected_shape, (provider, shape(result.events))
        assert result.terminal["reason"] == expected_reason, (provider, result.terminal.get("errorMessage"))
        assert result.events[0]["provider"] == provider
        if result.terminal["type"] == "error":
            assert result.terminal["errorMessage"].startswith(f"{provider}/{scenario} ")
        results[provider] = result
    # The vendors' streams normalize to the same text, calls and arguments.
    summaries = {p: [c for c in content_summary(r.message) if c[0] != "thinking"] for p, r in results.items()}
    assert all(summary == summaries["anthropic"] for summary in summaries.values()), summaries
    thinking = {p: [c for c in content_summary(r.message) if c[0] == "thinking"] for p, r in results.items()}
    assert all(t == thinking["anthropic"] for t in thinking.values()), thinking


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refusal_or_safety_is_an_error_that_says_so(gateway, provider):
    scenario = "safety" if provider == "google" else "refusal"
    result = gateway.stream(turn(f"{provider}/{scenario}"))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"].lower()
    assert any(word in message for word in ("refus", "safety", "content_filter")), message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_arguments_never_produce_a_call(gateway, provider):
    result = gateway.stream(turn(f"{provider}/tools-malformed"))
    assert result.terminal["type"] == "error"
    assert "toolcall_end" not in result.types()
    assert result.terminal["errorMessage"].startswith(f"{provider}/tools-malformed ")
    assert all(b["type"] != "toolCall" for b in result.message["content"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_http_429_carries_the_retry_hint(gateway, provider):
    result = gateway.stream(turn(f"{provider}/http-429;retry_after=0"))
    assert result.types() == ["error"]
    assert "429" in result.terminal["errorMessage"] and result.terminal["errorMessage"].endswith("retry-after-ms=0")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cancellation_closes_the_upstream(gateway, provider):
    m = marker()
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=turn(f"{provider}/slow;n=400;delay_ms=20", m)) as response:
            request_id = response.headers["x-request-id"]
            for line in response.iter_lines():
                if '"text_delta"' in line:
                    break
    closed = gateway.sim.wait(m, until="closed")
    assert closed["clientClosed"] is True and closed["completed"] is False
    job = gateway.job(request_id)
    assert job.turn.outcome == "aborted" and job.client_disconnected
    assert job.turn.message["stopReason"] == "aborted"
    assert job.turn.message["content"][0]["text"]  # the content received so far is kept
    assert len(gateway.sim.seen(m)) == 1  # content was sent: never retried


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_totals_and_catalog_cost(gateway, provider):
    model = {
        "anthropic": "claude-sonnet-4-5",
        "openai": "gpt-5-mini",
        "google": "gemini-2.5-flash",
        "compat": "meta-llama/Llama-3.3-70B-Instruct",
    }[provider]
    result = gateway.stream(turn(f"{provider}/{model}"))
    usage = result.terminal["usage"]
    assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"] > 0
    info = gateway.state.catalog.model(provider, model)
    expected = usage["input"] * info.pricing.input / 1e6 + usage["output"] * info.pricing.output / 1e6
    expected += (
        usage["cacheRead"] * info.pricing.cache_read / 1e6 + usage["cacheWrite"] * info.pricing.cache_write / 1e6
    )
    assert usage["cost"]["total"] == pytest.approx(expected) and usage["cost"]["total"] > 0
