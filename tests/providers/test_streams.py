"""Each vendor api end to end: the gateway under uvicorn → the vendor's official SDK (`anthropic`, `openai` for
Responses and for Chat Completions, `google-genai`) → the simulator, over loopback HTTP.

The simulator plays the same named scenarios (`simulator/scenarios.py`) in each vendor's wire format, so what
every vendor must do alike is one test parametrized by vendor (the provider names of tests/catalog.json:
`compat` is a keyless openai-completions provider); what only one vendor's wire has follows, a section per
vendor.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re

import pytest

from simulator import scenarios
from tests.conformance import check_frames, parse_sse
from tests.conftest import HERE, PROVIDER_KEYS, marker, turn

REPLY = "Hello from the simulator. You said: "
FAST = {"throttleMs": 0}  # every wire delta is its own event, so sequences are exact


def reply(prompt: str) -> list[str]:
    """The simulator's reply to `prompt`, as the chunks it streams."""
    return scenarios._words(f"{REPLY}{prompt}")


def assert_usage_sums(usage: dict) -> None:
    assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]


def vendors(*names: str) -> pytest.MarkDecorator:
    """Parametrize a test by the vendors (tests/catalog.json provider names) it covers."""
    return pytest.mark.parametrize("vendor", names)


# ------------------------------------------------------------------------------------ every vendor


@vendors("anthropic", "openai", "google", "compat")
def test_an_http_400_is_an_error_and_not_retried(gateway, vendor):
    detail = {"google": "INVALID_ARGUMENT: simulated bad request"}.get(
        vendor, "invalid_request_error: simulated bad request"
    )
    m = marker()
    result = gateway.stream(turn(f"{vendor}/http-400", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == f"{vendor}/http-400 returned HTTP 400: {detail}"
    assert len(gateway.sim.seen(m)) == 1


RETRY_AFTER = {  # the scenario's Retry-After (seconds or milliseconds), in milliseconds
    "anthropic": ("http-429;retry_after=1", 1000),
    "openai": ("http-429;retry_after_ms=300", 300),
    "google": ("http-429;retry_after_ms=300", 300),
    "compat": ("http-429;retry_after_ms=5", 5),
}


@vendors(*RETRY_AFTER)
def test_an_http_429_is_retried_after_its_retry_after_then_an_error_that_carries_it(gateway, vendor):
    scenario, retry_after_ms = RETRY_AFTER[vendor]
    detail = {"google": "RESOURCE_EXHAUSTED: simulated rate limit"}.get(
        vendor, "rate_limit_error: simulated rate limit"
    )
    m = marker()
    result = gateway.stream(turn(f"{vendor}/{scenario}", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == (
        f"{vendor}/{scenario} returned HTTP 429: {detail} (after 2 attempts) retry-after-ms={retry_after_ms}"
    )
    seen = gateway.sim.seen(m)
    assert [s["status"] for s in seen] == [429, 429]  # one retry by the gateway (GATEWAY_RETRIES=1), none by the SDK
    assert seen[1]["startedAt"] - seen[0]["startedAt"] >= 0.95 * retry_after_ms / 1000  # retry-after honoured
    job = gateway.job(result.terminal["message"]["requestId"])
    assert [a.http_status for a in job.attempts] == [429, 429]


TRUNCATED = {
    "anthropic": "anthropic/truncated stream ended before message_stop (truncated)",
    "openai": "openai/truncated stream ended before response.completed (truncated)",
    "google": "google/truncated stream ended without a finishReason (truncated)",
    "compat": "compat/truncated stream ended without a finish_reason (truncated)",
}


@vendors(*TRUNCATED)
def test_a_truncated_stream_is_an_error_that_keeps_the_partial_text(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/truncated"))
    assert result.terminal["type"] == "error"
    assert result.terminal["errorMessage"] == TRUNCATED[vendor]
    assert result.message["content"][0]["text"]


@vendors("anthropic", "google")
def test_a_connection_reset_is_an_error(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/reset"))
    assert result.terminal["type"] == "error" and "connection lost" in result.terminal["errorMessage"]


ERROR_EVENT = {
    "anthropic": "anthropic/error-mid-stream sent an error event: overloaded_error: Overloaded",
    "openai": "openai/error-mid-stream sent an error event: overloaded_error: Overloaded",
    "google": "google/error-mid-stream sent an error chunk: 503 UNAVAILABLE: Overloaded",
    "compat": "compat/error-mid-stream sent an error event: overloaded_error: Overloaded",
}


@vendors(*ERROR_EVENT)
def test_an_error_event_mid_stream_ends_the_turn_with_its_partial_text_and_no_retry(gateway, vendor):
    m = marker()
    result = gateway.stream(turn(f"{vendor}/error-mid-stream", m, options=FAST))
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "error"]
    assert result.terminal["errorMessage"] == ERROR_EVENT[vendor]
    assert result.message["content"][0]["text"] == "".join(reply(m)[:2])
    assert len(gateway.sim.seen(m)) == 1  # content was sent: no retry


ERROR_BEFORE_CONTENT = {
    "openai": "openai/error-before-content response failed: overloaded_error: Overloaded (after 2 attempts)",
    "google": "google/error-before-content sent an error chunk: 503 UNAVAILABLE: Overloaded (after 2 attempts)",
}


@vendors(*ERROR_BEFORE_CONTENT)
def test_an_error_before_any_content_is_retried_then_an_error(gateway, vendor):
    m = marker()
    result = gateway.stream(turn(f"{vendor}/error-before-content", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == ERROR_BEFORE_CONTENT[vendor]
    assert len(gateway.sim.seen(m)) == 2


@vendors("anthropic", "openai")
def test_an_unknown_wire_event_is_skipped(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/unknown-event"))
    assert result.terminal["type"] == "done" and result.message["content"][0]["text"].startswith(REPLY)


@vendors("anthropic", "openai")
def test_frames_after_the_terminal_event_are_dropped_and_counted(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/late-frames"))
    assert result.terminal["type"] == "done"
    assert "late" not in result.message["content"][0]["text"] and len(result.message["content"]) == 1
    job = gateway.job(result.headers["x-request-id"])
    assert job.turn.late_frames > 0 and job.turn.outcome == "done"


@vendors("openai", "google", "compat")
def test_cached_tokens_are_not_counted_as_input(gateway, vendor):
    usage = gateway.stream(turn(f"{vendor}/text;input=40;cache_read=60")).terminal["usage"]
    assert (usage["input"], usage["cacheRead"]) == (40, 60)  # the wire said 100 input tokens, 60 of them cached
    assert usage["totalTokens"] == 100 + usage["output"]
    assert_usage_sums(usage)


@vendors("anthropic", "openai")
def test_malformed_tool_arguments_are_an_error_and_never_a_call(gateway, vendor):
    call_id = {"anthropic": "toolu_sim_bad", "openai": "toolu_sim_bad|fc_toolu_sim_bad"}[vendor]
    result = gateway.stream(turn(f"{vendor}/tools-malformed"))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"]
    for part in (f"{vendor}/tools-malformed", call_id, "get_weather", "not valid JSON"):
        assert part in message
    assert "toolcall_end" not in result.types()
    assert result.message["content"] == []  # an incomplete call is never presented as a call


@vendors("anthropic", "google")
def test_a_tool_call_without_arguments_has_an_empty_object(gateway, vendor):
    call_id = {"anthropic": r"toolu_sim_noargs", "google": r"get_version_1_[0-9a-f]{8}"}[vendor]  # Gemini sends no id
    result = gateway.stream(turn(f"{vendor}/tool-empty-args"))
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert [e["delta"] for e in result.events if e["type"] == "toolcall_delta"] == ["{}"]
    [call] = result.message["content"]
    assert (call["type"], call["name"], call["arguments"]) == ("toolCall", "get_version", {})
    assert re.fullmatch(call_id, call["id"])
    assert result.terminal["reason"] == "toolUse"


SAFETY = {
    "openai": "openai/safety stopped by the content filter: incomplete reason=content_filter",
    "google": "google/safety stopped: finishReason=SAFETY",
    "compat": "compat/safety stopped by the content filter: finish_reason=content_filter",
}


@vendors(*SAFETY)
def test_a_safety_stop_is_an_error_that_says_so_and_keeps_the_partial_text(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/safety"))
    closed = ["text_end"] if vendor == "openai" else []  # the Responses wire ends its item before `incomplete`
    assert result.types() == ["start", "text_start", "text_delta", *closed, "error"]
    assert result.terminal["reason"] == "error"
    assert result.terminal["errorMessage"] == SAFETY[vendor]
    # The finishing chunk's text is kept.
    assert [(b["type"], b["text"]) for b in result.message["content"]] == [("text", "Partial ")]


@vendors("anthropic", "openai", "google")
def test_the_token_limit_is_a_done_turn_with_reason_length(gateway, vendor):
    result = gateway.stream(turn(f"{vendor}/max-tokens"))
    assert result.types()[-2:] == ["text_end", "done"]
    assert result.terminal["reason"] == "length" and result.message["stopReason"] == "length"
    assert result.message["content"][0]["text"]


# ---------------------------------------------------------------------- anthropic-messages (provider anthropic)


def test_anthropic_text_turn(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/text", f"hello {m}"))
    assert result.status == 200
    assert result.headers["x-request-id"] == result.events[0]["requestId"]
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-accel-buffering"] == "no"
    assert result.types()[0] == "start" and result.types()[-1] == "done"
    start = result.events[0]
    assert (start["provider"], start["api"], start["model"]) == ("anthropic", "anthropic-messages", "text")
    message = result.message
    assert message["content"] == [{"type": "text", "text": f"Hello from the simulator. You said: hello {m}"}]
    assert message["stopReason"] == "stop" and result.terminal["reason"] == "stop"
    usage = result.terminal["usage"]
    assert usage["input"] == 25 and usage["output"] > 0
    # Prices come from the catalog (tests/catalog.json prices anthropic/text at 3 / 15 per million).
    assert usage["cost"]["input"] == pytest.approx(25 * 3 / 1e6)
    assert usage["cost"]["output"] == pytest.approx(usage["output"] * 15 / 1e6)
    assert message["requestId"] == result.headers["x-request-id"]


def test_anthropic_thinking_with_signature(gateway):
    result = gateway.stream(turn("anthropic/thinking"))
    types = result.types()
    assert (
        types[:5] == ["start", "thinking_start", "thinking_delta", "thinking_delta", "thinking_delta"]
        or types[1] == "thinking_start"
    )
    end = next(e for e in result.events if e["type"] == "thinking_end")
    assert end["content"] == "The user greets me. I should greet back."
    assert end["contentSignature"] == "sig-sim-thinking-42"
    thinking = result.message["content"][0]
    assert thinking == {"type": "thinking", "thinking": end["content"], "thinkingSignature": "sig-sim-thinking-42"}
    assert result.message["content"][1]["type"] == "text"


def test_anthropic_redacted_thinking(gateway):
    result = gateway.stream(turn("anthropic/redacted-thinking"))
    end = next(e for e in result.events if e["type"] == "thinking_end")
    assert end["redacted"] is True and end["contentSignature"] == "EncryptedBlob==" and end["content"] == ""
    assert result.message["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "thinkingSignature": "EncryptedBlob==",
        "redacted": True,
    }


def test_anthropic_fragmented_parallel_tool_calls(gateway):
    result = gateway.stream(turn("anthropic/tools", options={"throttleMs": 0}))
    assert result.terminal["reason"] == "toolUse"
    calls = [e["toolCall"] for e in result.events if e["type"] == "toolcall_end"]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    assert calls[0] == {
        "id": "toolu_sim_weather",
        "name": "get_weather",
        "arguments": {"city": "Paris", "unit": "celsius"},
    }
    assert calls[1]["arguments"] == {"timezone": "Europe/Paris"}
    # With coalescing off every wire fragment is its own delta.
    weather_deltas = [e["delta"] for e in result.events if e["type"] == "toolcall_delta" and e["contentIndex"] == 1]
    assert weather_deltas == ['{"ci', 'ty": "Pa', 'ris", "unit', '": "celsius"}']


def test_anthropic_http_500_is_an_error_after_retries(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-500", m))
    assert result.terminal["reason"] == "error" and "HTTP 500" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 2


def test_anthropic_pause_turn_is_length_and_a_refusal_an_error(gateway):
    # The vendor paused its server-tool loop: the answer is not complete (docs/adapters/web-search.md).
    assert gateway.stream(turn("anthropic/pause-turn")).terminal["reason"] == "length"
    refusal = gateway.stream(turn("anthropic/refusal")).terminal
    assert refusal["type"] == "error" and "refused: stop_reason=refusal" in refusal["errorMessage"]
    assert refusal["message"]["content"][0]["text"] == "I can't help with that."


def test_anthropic_replayed_history_is_sent_in_anthropic_format(gateway):
    m = marker()
    body = {
        "model": "anthropic/text",
        "context": {
            "systemPrompt": "You are terse.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather in Paris?"},
                        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                    ],
                },
                {
                    "role": "assistant",
                    "provider": "anthropic",
                    "api": "anthropic-messages",
                    "model": "text",
                    "content": [
                        {"type": "thinking", "thinking": "Use the tool.", "thinkingSignature": "sig-1"},
                        {"type": "toolCall", "id": "toolu_01", "name": "get_weather", "arguments": {"city": "Paris"}},
                        {"type": "toolCall", "id": "toolu_02", "name": "get_time", "arguments": {}},
                    ],
                    "stopReason": "toolUse",
                },
                {
                    "role": "toolResult",
                    "toolCallId": "toolu_01",
                    "toolName": "get_weather",
                    "content": [{"type": "text", "text": "18C"}],
                    "isError": False,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "toolu_02",
                    "toolName": "get_time",
                    "content": [{"type": "text", "text": "noon"}],
                    "isError": False,
                },
                {"role": "user", "content": m},
            ],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ],
        },
        "options": {"maxTokens": 500, "temperature": 0.3},
    }
    assert gateway.stream(body).terminal["type"] == "done"
    sent = gateway.sim.seen(m)[0]["body"]
    assert sent["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert sent["max_tokens"] == 500 and sent["temperature"] == 0.3 and sent["stream"] is True
    assert sent["tools"][0]["input_schema"]["properties"]["city"] == {"type": "string"}
    user, assistant, results, last = sent["messages"]
    assert user["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
    }
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Use the tool.", "signature": "sig-1"}
    assert assistant["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert [r["tool_use_id"] for r in results["content"]] == ["toolu_01", "toolu_02"]  # merged into one user turn
    assert last["content"][-1]["text"] == m
    key_hash = gateway.sim.seen(m)[0]["authSha256"]
    assert key_hash == hashlib.sha256(PROVIDER_KEYS["anthropic"].encode()).hexdigest()


def test_anthropic_reasoning_sets_a_thinking_budget_and_drops_temperature(gateway):
    m = marker()
    body = turn("anthropic/unlisted-model", m, options={"reasoning": "medium", "maxTokens": 20000, "temperature": 0.5})
    gateway.stream(body)
    sent = gateway.sim.seen(m)[0]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert sent["max_tokens"] == 20000
    assert "temperature" not in sent


def test_anthropic_complete_returns_the_final_message(gateway):
    response = gateway.http.post("/v1/complete", json=turn("anthropic/tools"))
    assert response.status_code == 200
    message = response.json()
    assert message["stopReason"] == "toolUse" and len(message["content"]) == 3
    assert message["requestId"] == response.headers["x-request-id"]


def test_anthropic_complete_answers_502_with_the_partial_message(gateway):
    response = gateway.http.post("/v1/complete", json=turn("anthropic/error-mid-stream"))
    assert response.status_code == 502
    body = response.json()
    assert "overloaded_error" in body["error"]["message"]
    assert body["message"]["stopReason"] == "error" and body["requestId"] == response.headers["x-request-id"]


def test_anthropic_pi_door_ignores_client_base_url_and_headers(gateway, sim):
    m = marker()
    body = {
        "model": {
            "id": "text",
            "provider": "anthropic",
            "api": "anthropic-messages",
            "baseUrl": "http://127.0.0.1:9/steal",
            "headers": {"x-api-key": "attacker"},
        },
        "context": {"messages": [{"role": "user", "content": m}]},
        "options": {"maxTokens": 100},
    }
    for path in ("/api/stream", f"{gateway.url}//api/stream"):
        result = gateway.stream(body, path=path)
        assert result.status == 200 and result.terminal["type"] == "done"
        # pi's client reads `data: ` lines of one-line JSON.
        assert all(line.startswith("data: {") for line in result.text.splitlines() if line.startswith("data:"))
    assert len(sim.seen(m)) == 2  # served by the configured upstream, not the client's baseUrl
    bad = gateway.http.post(
        "/api/stream",
        json={"model": {"id": "x", "provider": "nope"}, "context": {"messages": [{"role": "user", "content": "x"}]}},
    )
    assert bad.status_code == 404 and isinstance(bad.json()["error"], str)


def test_anthropic_timeouts_and_keepalive_comments_while_upstream_is_silent(gateway_factory):
    gw = gateway_factory(keepalive_interval=0.2, first_event_timeout=0.6, idle_timeout=0.6, retries=0)
    result = gw.stream(turn("anthropic/hang-before-headers"))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == "anthropic/hang-before-headers first-event timeout fired after 0.6s"
    assert "ping" in result.text
    result = gw.stream(turn("anthropic/hang-mid-stream"))
    assert result.terminal["errorMessage"] == "anthropic/hang-mid-stream idle timeout fired after 0.6s"
    assert result.message["content"][0]["text"]


def test_anthropic_raw_sse_parse_matches(gateway):
    response = gateway.http.post("/v1/stream", json=turn("anthropic/text"))
    events = check_frames(parse_sse(response.text))
    assert events[-1]["type"] == "done"


# --------------------------------------------------------------------------- openai-responses (provider openai)


def deltas(result, kind: str, index: int | None = None) -> list[str]:
    return [e["delta"] for e in result.events if e["type"] == kind and (index is None or e["contentIndex"] == index)]


def test_openai_text_turn(gateway):
    m = marker()
    result = gateway.stream(turn("openai/text", f"hello {m}", options={"throttleMs": 0}))
    assert result.status == 200
    text = f"{REPLY}hello {m}"
    n = len(deltas(result, "text_delta"))
    assert result.types() == ["start", "text_start", *["text_delta"] * n, "text_end", "done"]
    start = result.events[0]
    assert (start["provider"], start["api"], start["model"]) == ("openai", "openai-responses", "text")
    assert "".join(deltas(result, "text_delta")) == text and n > 1
    end = result.events[-2]
    assert end == {
        "type": "text_end",
        "contentIndex": 0,
        "content": text,
        "contentSignature": '{"v":1,"id":"msg_sim_0000"}',
    }
    assert result.message["content"] == [{"type": "text", "text": text, "textSignature": '{"v":1,"id":"msg_sim_0000"}'}]
    assert result.terminal["reason"] == "stop" and result.message["stopReason"] == "stop"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["cacheRead"], usage["cacheWrite"]) == (25, 0, 0) and usage["output"] > 0
    assert gateway.sim.seen(m)[0]["authSha256"] == hashlib.sha256(PROVIDER_KEYS["openai"].encode()).hexdigest()


def test_openai_thinking_summary_with_a_replayable_signature(gateway):
    result = gateway.stream(turn("openai/thinking", options={"throttleMs": 0}))
    assert result.types()[:6] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
    ]
    assert deltas(result, "thinking_delta") == ["The user greets me. ", "I should ", "greet back."]
    thinking = result.message["content"][0]
    assert thinking["thinking"] == "The user greets me. I should greet back."
    item = json.loads(thinking["thinkingSignature"])
    assert item == {
        "id": "rs_sim_0000",
        "type": "reasoning",
        "encrypted_content": "sig-sim-thinking-42",
        "summary": [{"type": "summary_text", "text": "The user greets me. I should greet back."}],
    }
    assert result.message["content"][1]["type"] == "text"

    # Replayed to the same model, the thinking block goes back as that very reasoning item.
    m = marker()
    body = {
        "model": "openai/thinking",
        "context": {"messages": [{"role": "user", "content": "hi"}, result.message, {"role": "user", "content": m}]},
    }
    assert gateway.stream(body).terminal["type"] == "done"
    sent = gateway.sim.seen(m)[0]["body"]["input"]
    assert sent[1] == item
    assert sent[2]["type"] == "message" and sent[2]["id"] == "msg_sim_0001"


def test_openai_redacted_reasoning_is_an_empty_signed_thinking_block(gateway):
    result = gateway.stream(turn("openai/redacted-thinking"))
    thinking = result.message["content"][0]
    assert thinking["thinking"] == ""
    assert json.loads(thinking["thinkingSignature"]) == {
        "id": "rs_sim_0000",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "EncryptedBlob==",
    }
    assert result.terminal["type"] == "done"


def test_openai_parallel_tool_calls_with_fragmented_arguments(gateway):
    result = gateway.stream(turn("openai/tools", options={"throttleMs": 0}))
    assert result.terminal["reason"] == "toolUse"
    calls = [e["toolCall"] for e in result.events if e["type"] == "toolcall_end"]
    assert calls == [
        {
            "id": "toolu_sim_weather|fc_toolu_sim_weather",
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "celsius"},
        },
        {"id": "toolu_sim_time|fc_toolu_sim_time", "name": "get_time", "arguments": {"timezone": "Europe/Paris"}},
    ]
    assert deltas(result, "toolcall_delta", 1) == ['{"ci', 'ty": "Pa', 'ris", "unit', '": "celsius"}']
    assert deltas(result, "toolcall_delta", 2) == ['{"timez', 'one": "Europe/', 'Paris"}']
    assert [b["type"] for b in result.message["content"]] == ["text", "toolCall", "toolCall"]


def test_openai_arguments_sent_only_whole_are_one_delta(gateway):
    result = gateway.stream(turn("openai/args-only-done", options={"throttleMs": 0}))
    assert result.types() == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert deltas(result, "toolcall_delta") == ['{"city": "Paris", "unit": "celsius"}', '{"timezone": "Europe/Paris"}']
    assert result.message["content"] == [
        {
            "type": "toolCall",
            "id": "call_sim_weather|fc_call_sim_weather",
            "name": "get_weather",
            "arguments": {"city": "Paris", "unit": "celsius"},
        },
        {
            "type": "toolCall",
            "id": "call_sim_time|fc_call_sim_time",
            "name": "get_time",
            "arguments": {"timezone": "Europe/Paris"},
        },
    ]
    assert result.terminal["reason"] == "toolUse"


def test_openai_an_incomplete_response_is_length(gateway):
    result = gateway.stream(turn("openai/incomplete"))
    assert result.types()[-2:] == ["text_end", "done"]
    assert result.terminal["type"] == "done" and result.terminal["reason"] == "length"
    assert result.message["stopReason"] == "length"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"]) == (25, 4)


def test_openai_a_refusal_is_an_error_that_says_so(gateway):
    result = gateway.stream(turn("openai/refusal"))
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]
    assert result.terminal["errorMessage"] == "openai/refusal refused: the response is a refusal"
    assert result.message["content"][0]["text"] == "I can't help with that."
    assert result.terminal["usage"]["output"] == 6  # the refused response still counts


def test_openai_connection_refused_is_a_transport_error(gateway_factory):
    gw = gateway_factory(openai_base_url="http://127.0.0.1:9/openai/v1", retries=0)
    result = gw.stream(turn("openai/text"))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"].startswith("openai/text connection failed")


def test_openai_replay_text_nonascii(gateway):
    result = gateway.stream(turn("openai/replay-text-nonascii"))
    assert result.types()[0] == "start" and result.terminal["reason"] == "stop"
    assert result.message["content"] == [
        {
            "type": "text",
            "text": "Olá!",
            "textSignature": '{"v":1,"id":"msg_099d6c816b4d9f35016a3c11fb338081a289266547cae6ff41"}',
        }
    ]
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["totalTokens"]) == (20, 3, 0, 23)


def test_openai_replay_reasoning_summary_text(gateway):
    result = gateway.stream(turn("openai/replay-reasoning-summary-text"))
    thinking, text = result.message["content"]
    assert thinking["type"] == "thinking" and len(thinking["thinking"]) == 468
    assert thinking["thinking"].startswith("**Summarizing Florence's weather**")
    item = json.loads(thinking["thinkingSignature"])
    assert (
        item["id"] == "rs_027ec5e155f266ec016a3c12675f308191aa4cbc320785b520" and len(item["encrypted_content"]) == 1676
    )
    assert item["summary"] == [{"type": "summary_text", "text": thinking["thinking"]}]
    assert len(text["text"]) == 297 and len(text["text"].encode()) == 312
    assert text["text"].startswith("The current temperature in Florence, Italy is 40 °C — it’s very hot.")
    assert text["text"].endswith("Stay cool and safe!")
    assert result.terminal["reason"] == "stop"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"]) == (89, 196, 0)


def test_openai_replay_reasoning_tool(gateway):
    result = gateway.stream(turn("openai/replay-reasoning-tool"))
    thinking, call = result.message["content"]
    assert thinking["thinking"] == "" and len(json.loads(thinking["thinkingSignature"])["encrypted_content"]) == 2212
    assert call == {
        "type": "toolCall",
        "name": "weather",
        "arguments": {"location": "Florence, Italy"},
        "id": "call_EDay3PkaZNpmYHDVyeY69wF9|fc_0c6e197b73d08e53016a3c1266504c8191975a5dba87645ec1",
    }
    assert result.terminal["reason"] == "toolUse"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"]) == (60, 225)


def test_openai_replay_tools_parallel(gateway):
    result = gateway.stream(turn("openai/replay-tools-parallel"))
    calls = result.message["content"]
    assert [(c["name"], c["id"].split("|")[0], c["arguments"]) for c in calls] == [
        ("add", "call_NnEvpiwdL8XrZ6F3T9VJyVw7", {"a": 2, "b": 3}),
        ("multiply", "call_TQ8336oa6YnuT2leYzRDBBLz", {"a": 2, "b": 3}),
    ]
    assert all(c["id"].split("|")[1].startswith("fc_") for c in calls)
    assert result.terminal["reason"] == "toolUse"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"]) == (104, 51)


def test_openai_replay_tool_fragmented_early_format(gateway):
    result = gateway.stream(turn("openai/replay-tool-fragmented", options={"throttleMs": 0}))
    assert result.message["content"] == [
        {
            "type": "toolCall",
            "name": "get_capital",
            "arguments": {"country": "France"},
            "id": "call_kL0PCQV7M2WMoVX8V8OtYSAL|fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2",
        }
    ]
    assert deltas(result, "toolcall_delta") == ['{"', "country", '":"', "France", '"}']
    assert result.terminal["reason"] == "toolUse"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"]) == (255, 16)


def test_openai_request_body(gateway):
    m = marker()
    reasoning_item = {
        "id": "rs_prev",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Use the tool."}],
        "encrypted_content": "ENC==",
    }
    body = {
        "model": "openai/text",
        "context": {
            "systemPrompt": "You are terse.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather in Paris?"},
                        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                    ],
                },
                {
                    "role": "assistant",
                    "provider": "openai",
                    "api": "openai-responses",
                    "model": "text",
                    "content": [
                        {
                            "type": "thinking",
                            "thinking": "Use the tool.",
                            "thinkingSignature": json.dumps(reasoning_item),
                        },
                        {"type": "text", "text": "Checking.", "textSignature": '{"v":1,"id":"msg_prev"}'},
                        {
                            "type": "toolCall",
                            "id": "call_1|fc_1",
                            "name": "get_weather",
                            "arguments": {"city": "Paris"},
                        },
                    ],
                    "stopReason": "toolUse",
                },
                {
                    "role": "toolResult",
                    "toolCallId": "call_1|fc_1",
                    "toolName": "get_weather",
                    "content": [{"type": "text", "text": "18C"}, {"type": "text", "text": "cloudy"}],
                    "isError": False,
                },
                {
                    "role": "assistant",
                    "provider": "anthropic",
                    "api": "anthropic-messages",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "thinking", "thinking": "Now the time.", "thinkingSignature": "anthropic-sig"},
                        {"type": "toolCall", "id": "toolu_01.x", "name": "get_time", "arguments": {}},
                    ],
                    "stopReason": "toolUse",
                },
                {
                    "role": "toolResult",
                    "toolCallId": "toolu_01.x",
                    "toolName": "get_time",
                    "content": [{"type": "text", "text": "noon"}],
                    "isError": False,
                },
                {"role": "user", "content": m},
            ],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            ],
        },
        "options": {"maxTokens": 500, "temperature": 0.3, "reasoning": "xhigh", "sessionId": "sess-1"},
    }
    assert gateway.stream(body).terminal["type"] == "done"
    sent = gateway.sim.seen(m)[0]["body"]
    assert sent["model"] == "text" and sent["stream"] is True and sent["store"] is False
    assert sent["instructions"] == "You are terse."
    assert sent["max_output_tokens"] == 500 and "temperature" not in sent
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}  # xhigh is high for a model without it
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["prompt_cache_key"] == "sess-1"
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather",
            "strict": False,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert sent["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather in Paris?"},
                {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,aGVsbG8="},
            ],
        },
        reasoning_item,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_prev",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "id": "fc_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "18C\ncloudy"},
        # Another model's turn: its thinking becomes text, its call id is normalised and sent without an item id.
        {"role": "assistant", "content": "Now the time."},
        {"type": "function_call", "call_id": "call_toolu_01_x", "name": "get_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_toolu_01_x", "output": "noon"},
        {"role": "user", "content": [{"type": "input_text", "text": m}]},
    ]


# ----------------------------------------------------------------------- google-generative-ai (provider google)


def test_google_text_turn(gateway):
    m = marker()
    result = gateway.stream(turn("google/text", f"hello {m}", options=FAST))
    pieces = reply(f"hello {m}")
    assert result.types() == ["start", "text_start", *["text_delta"] * len(pieces), "text_end", "done"]
    assert result.events[0] | {"requestId": None} == {
        "type": "start",
        "requestId": None,
        "provider": "google",
        "api": "google-generative-ai",
        "model": "text",
    }
    assert [e["delta"] for e in result.events if e["type"] == "text_delta"] == pieces
    assert result.message["content"] == [{"type": "text", "text": "".join(pieces)}]
    assert result.terminal["reason"] == "stop"
    usage = result.terminal["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"]) == (25, len(pieces) + 3, 0)
    assert_usage_sums(usage)
    seen = gateway.sim.seen(m)[0]
    assert seen["vendor"] == "google" and seen["model"] == "text"  # the model came from the URL path
    assert seen["authSha256"] == hashlib.sha256(PROVIDER_KEYS["google"].encode()).hexdigest()


def test_google_thinking_with_signature(gateway):
    result = gateway.stream(turn("google/thinking", options=FAST))
    signature = base64.b64encode(b"sig-sim-thinking-42").decode()  # a thoughtSignature is base64 on the wire
    assert result.types()[:7] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
    ]
    end = result.events[5]
    assert end == {
        "type": "thinking_end",
        "contentIndex": 0,
        "content": "The user greets me. I should greet back.",
        "contentSignature": signature,
    }
    assert result.message["content"][0] == {
        "type": "thinking",
        "thinking": end["content"],
        "thinkingSignature": signature,
    }
    assert result.message["content"][1]["type"] == "text"
    usage = result.terminal["usage"]
    assert usage["output"] == result.message["usage"]["output"] > 3  # candidates + 3 thought chunks
    assert_usage_sums(usage)


def test_google_parallel_tool_calls_without_ids_get_unique_ids(gateway):
    result = gateway.stream(turn("google/tools", options=FAST))
    assert result.types() == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert [e["delta"] for e in result.events if e["type"] == "toolcall_delta"] == [
        '{"city":"Paris","unit":"celsius"}',
        '{"timezone":"Europe/Paris"}',
    ]  # ONE delta per call
    calls = [e["toolCall"] for e in result.events if e["type"] == "toolcall_end"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    assert re.fullmatch(r"get_weather_1_[0-9a-f]{8}", calls[0]["id"])
    assert re.fullmatch(r"get_time_2_[0-9a-f]{8}", calls[1]["id"])
    starts = [e["id"] for e in result.events if e["type"] == "toolcall_start"]
    assert starts == [c["id"] for c in calls]
    assert result.terminal["reason"] == "toolUse" and result.message["stopReason"] == "toolUse"


def test_google_tool_call_with_finish_reason_in_a_later_chunk(gateway):
    m = marker()
    result = gateway.stream(turn("google/tool-stop-later", m))
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert result.terminal["reason"] == "toolUse"  # STOP on the wire
    assert result.message["content"][0]["arguments"] == {"city": "Paris", "unit": "celsius"}
    assert gateway.sim.wait(m)["framesSent"] == 2  # the call, then the empty-text chunk with finishReason


def test_google_malformed_function_call_is_an_error(gateway):
    m = marker()
    result = gateway.stream(turn("google/tools-malformed", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"].startswith(
        "google/tools-malformed stopped: finishReason=MALFORMED_FUNCTION_CALL"
    )
    assert len(gateway.sim.seen(m)) == 1  # not retried


def sample_parts(name: str) -> list[dict]:
    raw = (HERE / "wire_samples" / f"gemini-{name}.sse").read_bytes().decode()
    return [
        p
        for f in raw.split("\r\n\r\n")
        if f.startswith("data: ")
        for p in json.loads(f[6:])["candidates"][0]["content"]["parts"]
    ]


def replay(gateway, name: str):
    result = gateway.stream(turn(f"google/replay-{name}", options=FAST))
    assert_usage_sums(result.terminal["usage"])
    return result


def usage_of(result) -> tuple[int, int, int]:
    u = result.terminal["usage"]
    return u["input"], u["output"], u["cacheRead"]


def test_google_replay_text_usage_growing(gateway):
    result = replay(gateway, "text-usage-growing")
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert result.message["content"] == [{"type": "text", "text": "\n".join(str(i) for i in range(1, 31))}]
    assert result.terminal["reason"] == "stop"
    assert usage_of(result) == (18, 80 + 35, 0) and result.terminal["usage"]["totalTokens"] == 133


def test_google_replay_thought_parts_then_text(gateway):
    result = replay(gateway, "thought-parts-text")
    types = result.types()
    assert types[:2] == ["start", "thinking_start"] and types[-3:] == ["text_delta", "text_end", "done"]
    assert types.count("thinking_end") == 1 and types.count("text_start") == 1
    thinking, text = result.message["content"]
    assert len(thinking["thinking"]) == 1575 and "thinkingSignature" not in thinking
    assert len(text["text"]) == 1938
    assert text["text"].startswith(
        "This is a great question! Safely crossing the street is all about being aware and predictable."
    )
    assert text["text"].endswith("Always assume a driver might not see you.")
    signed = [p["thoughtSignature"] for p in sample_parts("thought-parts-text") if "thoughtSignature" in p]
    assert len(signed) == 1 and len(signed[0]) == 6152 and text["textSignature"] == signed[0]
    assert result.terminal["reason"] == "stop"
    assert usage_of(result) == (34, 469 + 787, 0) and result.terminal["usage"]["totalTokens"] == 1290


def test_google_replay_parallel_calls_split_across_chunks(gateway):
    result = replay(gateway, "tools-parallel-split")
    assert result.types() == ["start"] + ["toolcall_start", "toolcall_delta", "toolcall_end"] * 2 + ["done"]
    add, multiply = result.message["content"]
    assert (add["name"], add["arguments"]) == ("add", {"a": 2, "b": 3})
    assert (multiply["name"], multiply["arguments"]) == ("multiply", {"a": 2, "b": 3})
    assert add["id"] != multiply["id"] and add["id"].startswith("add_") and multiply["id"].startswith("multiply_")
    signature = sample_parts("tools-parallel-split")[0]["thoughtSignature"]
    assert len(signature) == 1436 and add["thoughtSignature"] == signature and "thoughtSignature" not in multiply
    assert result.terminal["reason"] == "toolUse"
    assert usage_of(result) == (121, 36 + 193, 0) and result.terminal["usage"]["totalTokens"] == 350


def test_google_replay_single_call_without_id(gateway):
    result = replay(gateway, "tool-no-id")
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    call = result.message["content"][0]
    assert (call["name"], call["arguments"]) == ("get_capital", {"country": "France"})
    assert re.fullmatch(r"get_capital_1_[0-9a-f]{8}", call["id"])
    assert result.terminal["reason"] == "toolUse"
    assert usage_of(result) == (52, 5, 0) and result.terminal["usage"]["totalTokens"] == 57


def test_google_replay_gemini3_call_with_id_and_empty_args(gateway):
    result = replay(gateway, "3-tool-id-empty-args")
    # The trailing {"text": ""} chunk carries only the finishReason: no text event.
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    call = result.message["content"][0]
    signature = sample_parts("3-tool-id-empty-args")[0]["thoughtSignature"]
    assert call == {
        "type": "toolCall",
        "id": "96c1su3s",
        "name": "get_user_country",
        "arguments": {},
        "thoughtSignature": signature,
    }
    assert len(signature) == 540
    assert result.terminal["reason"] == "toolUse"
    assert usage_of(result) == (29, 12 + 69, 0) and result.terminal["usage"]["totalTokens"] == 110


def test_google_replay_gemini3_signature_on_a_final_empty_part(gateway):
    result = replay(gateway, "3-text-thought-signature")
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    text = result.message["content"][0]
    expected = (
        '"Hi" in Portuguese is **"Oi"** (pronounced like "oy"). \n\nYou can also use **"Olá"** '
        '(pronounced oh-LAH), which means "Hello".'
    )
    assert text["text"] == expected and len(expected) == 125
    signature = sample_parts("3-text-thought-signature")[-1]["thoughtSignature"]
    assert len(signature) == 1228 and text["textSignature"] == signature
    assert result.events[-2]["contentSignature"] == signature
    assert usage_of(result) == (11, 39 + 206, 0) and result.terminal["usage"]["totalTokens"] == 256


def camel(value):
    """The SDK writes some nested keys in snake_case (Google's JSON parser takes both): compare in camelCase."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda g: g.group(1).upper(), k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def test_google_request_body(gateway):
    m = marker()
    body = {
        "model": "google/gemini-2.5-flash",
        "context": {
            "systemPrompt": "You are terse.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather in Paris?"},
                        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                    ],
                },
                {
                    "role": "assistant",
                    "provider": "google",
                    "api": "google-generative-ai",
                    "model": "gemini-2.5-flash",
                    "content": [
                        {"type": "thinking", "thinking": "Use the tool.", "thinkingSignature": "c2lnLTE="},
                        {
                            "type": "toolCall",
                            "id": "get_weather_1_ab",
                            "name": "get_weather",
                            "arguments": {"city": "Paris"},
                            "thoughtSignature": "c2lnLTI=",
                        },
                        {"type": "toolCall", "id": "get_time_2_cd", "name": "get_time", "arguments": {}},
                    ],
                    "stopReason": "toolUse",
                },
                {
                    "role": "toolResult",
                    "toolCallId": "get_weather_1_ab",
                    "toolName": "get_weather",
                    "content": [{"type": "text", "text": "18C"}],
                    "isError": False,
                },
                {
                    "role": "toolResult",
                    "toolCallId": "get_time_2_cd",
                    "toolName": "get_time",
                    "content": [{"type": "text", "text": "no clock"}],
                    "isError": True,
                },
                {"role": "user", "content": m},
            ],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                }
            ],
        },
        "options": {"maxTokens": 500, "temperature": 0.3, "reasoning": "medium"},
    }
    assert gateway.stream(body).terminal["type"] == "done"
    seen = gateway.sim.seen(m)
    assert len(seen) == 1 and seen[0]["model"] == "gemini-2.5-flash"
    sent = camel(seen[0]["body"])
    assert sent["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert sent["generationConfig"] == {
        "maxOutputTokens": 500,
        "temperature": 0.3,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8192},
    }
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Weather",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ]
    user, model, results, last = sent["contents"]
    assert user == {
        "role": "user",
        "parts": [{"text": "Weather in Paris?"}, {"inlineData": {"mimeType": "image/png", "data": "aGVsbG8="}}],
    }
    assert model == {
        "role": "model",
        "parts": [
            {
                "text": "Use the tool.",
                "thought": True,
                "thoughtSignature": "c2lnLTE=",
            },  # same model: thinking kept, signed
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLTI="},
            {"functionCall": {"name": "get_time", "args": {}}},  # Gemini 2.5: an unsigned call stays unsigned
        ],
    }
    assert results == {
        "role": "user",
        "parts": [  # consecutive results merged into one user turn
            {"functionResponse": {"name": "get_weather", "response": {"output": "18C"}}},
            {"functionResponse": {"name": "get_time", "response": {"error": "no clock"}}},
        ],
    }
    assert last == {"role": "user", "parts": [{"text": m}]}


def test_google_gemini3_request_uses_levels_and_signs_foreign_calls(gateway):
    m = marker()
    body = {
        "model": "google/gemini-3-flash-preview",
        "context": {
            "messages": [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "provider": "anthropic",
                    "api": "anthropic-messages",
                    "model": "claude-x",
                    "content": [
                        {"type": "thinking", "thinking": "Think.", "thinkingSignature": "anthropic-sig"},
                        {"type": "toolCall", "id": "toolu_01", "name": "lookup", "arguments": {"q": 1}},
                    ],
                    "stopReason": "toolUse",
                },
                {
                    "role": "toolResult",
                    "toolCallId": "toolu_01",
                    "toolName": "lookup",
                    "content": [{"type": "text", "text": "1"}],
                },
                {"role": "user", "content": m},
            ]
        },
        "options": {"reasoning": "low"},
    }
    assert gateway.stream(body).terminal["type"] == "done"
    sent = camel(gateway.sim.seen(m)[0]["body"])
    assert sent["generationConfig"] == {"thinkingConfig": {"includeThoughts": True, "thinkingLevel": "LOW"}}
    assert sent["contents"][1]["parts"] == [
        {"text": "Think."},  # another model's thinking is plain text
        {"functionCall": {"name": "lookup", "args": {"q": 1}}, "thoughtSignature": "skip_thought_signature_validator"},
    ]


# ------------------------------------------------------------------------- openai-completions (provider compat)


def calls(result):
    return [(b["id"], b["name"], b["arguments"]) for b in result.message["content"] if b["type"] == "toolCall"]


def test_compat_text_turn_and_request_body(gateway):
    m = marker()
    body = turn(
        "compat/meta-llama/Llama-3.3-70B-Instruct", m, options={"throttleMs": 0, "maxTokens": 100, "temperature": 0.2}
    )
    body["context"]["systemPrompt"] = "Be brief."
    result = gateway.stream(body)
    assert result.terminal["type"] == "done" and result.terminal["reason"] == "stop"
    start = result.events[0]
    assert (start["provider"], start["api"], start["model"]) == (
        "compat",
        "openai-completions",
        "meta-llama/Llama-3.3-70B-Instruct",
    )
    assert result.message["content"] == [{"type": "text", "text": f"Hello from the simulator. You said: {m}"}]
    sent = gateway.sim.seen(m)[0]["body"]
    assert sent["model"] == "meta-llama/Llama-3.3-70B-Instruct"  # the id with its "/" reaches the vendor whole
    assert sent["messages"] == [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": m}]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] == 100 and sent["temperature"] == 0.2


def test_compat_thinking_from_reasoning_content_or_reasoning(gateway):
    for field in ("reasoning_content", "reasoning"):
        result = gateway.stream(turn(f"compat/thinking;reasoning_field={field}"))
        thinking = result.message["content"][0]
        assert thinking == {
            "type": "thinking",
            "thinking": "The user greets me. I should greet back.",
            "thinkingSignature": field,
        }


def test_compat_encrypted_reasoning_details_are_the_signature(gateway):
    thinking = gateway.stream(turn("compat/redacted-thinking")).message["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinkingSignature"] == "EncryptedBlob=="


def test_compat_tool_calls_by_index_and_without_index(gateway):
    expected = [
        ("toolu_sim_weather", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("toolu_sim_time", "get_time", {"timezone": "Europe/Paris"}),
    ]
    for model in ("compat/tools", "compat/tools;quirk=no_index"):
        result = gateway.stream(turn(model))
        assert result.terminal["reason"] == "toolUse" and calls(result) == expected


def test_compat_usage_repeated_or_in_the_finish_chunk_counts_once(gateway):
    for quirk in ("usage_twice", "usage_in_finish"):
        result = gateway.stream(turn(f"compat/text;quirk={quirk}"))
        assert result.terminal["type"] == "done"
        assert result.terminal["usage"]["input"] == 25 and result.terminal["usage"]["output"] > 0


def test_compat_a_missing_finish_reason_is_a_truncated_error(gateway):
    result = gateway.stream(turn("compat/text;quirk=no_finish"))
    assert result.terminal["type"] == "error"
    assert "without a finish_reason" in result.terminal["errorMessage"]


def test_compat_unsupported_request_is_refused_before_any_call(gateway_factory, tmp_path):
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"providers": [{"name": "compat", "api": "openai-completions", "compat": {"stop": false}}]}')
    gw = gateway_factory(catalog=str(catalog))
    m = marker()
    result = gw.stream(turn("compat/text", m, options={"stop": ["END"]}))
    assert result.status == 400 and "stop sequences" in result.text
    assert gw.sim.seen(m) == []
