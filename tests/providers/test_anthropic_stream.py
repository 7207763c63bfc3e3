"""The Anthropic path end to end: gateway under uvicorn → official SDK → simulator, over loopback HTTP."""

from __future__ import annotations

import pytest

from tests.conformance import check_frames, parse_sse
from tests.conftest import PROVIDER_KEYS, marker, turn


def test_text_turn(gateway):
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


def test_thinking_with_signature(gateway):
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


def test_redacted_thinking(gateway):
    result = gateway.stream(turn("anthropic/redacted-thinking"))
    end = next(e for e in result.events if e["type"] == "thinking_end")
    assert end["redacted"] is True and end["contentSignature"] == "EncryptedBlob==" and end["content"] == ""
    assert result.message["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "thinkingSignature": "EncryptedBlob==",
        "redacted": True,
    }


def test_fragmented_parallel_tool_calls(gateway):
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


def test_tool_call_without_arguments_is_empty_object(gateway):
    result = gateway.stream(turn("anthropic/tool-empty-args"))
    deltas = [e["delta"] for e in result.events if e["type"] == "toolcall_delta"]
    assert deltas == ["{}"]
    assert result.message["content"] == [
        {"type": "toolCall", "id": "toolu_sim_noargs", "name": "get_version", "arguments": {}}
    ]
    assert result.terminal["reason"] == "toolUse"


def test_malformed_tool_json_is_an_error(gateway):
    result = gateway.stream(turn("anthropic/tools-malformed"))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"]
    for part in ("anthropic", "tools-malformed", "toolu_sim_bad", "get_weather", "not valid JSON"):
        assert part in message
    assert "toolcall_end" not in result.types()
    assert result.message["content"] == []  # an incomplete call is never presented as a call


def test_provider_error_mid_stream(gateway):
    result = gateway.stream(turn("anthropic/error-mid-stream"))
    assert result.terminal["type"] == "error"
    assert "anthropic/error-mid-stream" in result.terminal["errorMessage"]
    assert "overloaded_error: Overloaded" in result.terminal["errorMessage"]
    # Content was sent, so no retry: the partial text stays in the message.
    assert result.message["content"][0]["type"] == "text" and result.message["content"][0]["text"]


def test_http_429_surfaces_retry_after(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-429;retry_after=1", m))
    assert result.types() == ["error"]
    message = result.terminal["errorMessage"]
    assert "anthropic/http-429;retry_after=1 returned HTTP 429" in message
    assert message.endswith(" retry-after-ms=1000")
    seen = gateway.sim.seen(m)
    assert len(seen) == 2  # one retry (tests run with GATEWAY_RETRIES=1)
    assert seen[1]["startedAt"] - seen[0]["startedAt"] >= 0.95  # retry-after honoured


def test_http_500_is_an_error_after_retries(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-500", m))
    assert result.terminal["reason"] == "error" and "HTTP 500" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 2


def test_http_400_is_not_retried(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-400", m))
    assert "HTTP 400: invalid_request_error: simulated bad request" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 1


def test_truncated_stream_is_an_error(gateway):
    result = gateway.stream(turn("anthropic/truncated"))
    assert result.terminal["type"] == "error"
    assert "truncated" in result.terminal["errorMessage"]


def test_connection_reset_is_an_error(gateway):
    result = gateway.stream(turn("anthropic/reset"))
    assert result.terminal["type"] == "error"
    assert "connection lost" in result.terminal["errorMessage"]


def test_stop_reasons(gateway):
    assert gateway.stream(turn("anthropic/max-tokens")).terminal["reason"] == "length"
    # The vendor paused its server-tool loop: the answer is not complete (docs/adapters/web-search.md).
    assert gateway.stream(turn("anthropic/pause-turn")).terminal["reason"] == "length"
    refusal = gateway.stream(turn("anthropic/refusal")).terminal
    assert refusal["type"] == "error" and "refused: stop_reason=refusal" in refusal["errorMessage"]
    assert refusal["message"]["content"][0]["text"] == "I can't help with that."


def test_unknown_wire_event_is_skipped(gateway):
    result = gateway.stream(turn("anthropic/unknown-event"))
    assert result.terminal["type"] == "done"


def test_late_frames_after_terminal_are_dropped_and_counted(gateway):
    result = gateway.stream(turn("anthropic/late-frames"))
    assert result.terminal["type"] == "done"
    assert "late" not in result.message["content"][0]["text"]
    job = gateway.job(result.headers["x-request-id"])
    assert job.turn.late_frames > 0
    assert job.turn.outcome == "done"


def test_replayed_history_is_sent_in_anthropic_format(gateway):
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
    import hashlib

    assert key_hash == hashlib.sha256(PROVIDER_KEYS["anthropic"].encode()).hexdigest()


def test_reasoning_sets_a_thinking_budget_and_drops_temperature(gateway):
    m = marker()
    body = turn("anthropic/unlisted-model", m, options={"reasoning": "medium", "maxTokens": 20000, "temperature": 0.5})
    gateway.stream(body)
    sent = gateway.sim.seen(m)[0]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert sent["max_tokens"] == 20000
    assert "temperature" not in sent


def test_complete_returns_the_final_message(gateway):
    response = gateway.http.post("/v1/complete", json=turn("anthropic/tools"))
    assert response.status_code == 200
    message = response.json()
    assert message["stopReason"] == "toolUse" and len(message["content"]) == 3
    assert message["requestId"] == response.headers["x-request-id"]


def test_complete_answers_502_with_the_partial_message(gateway):
    response = gateway.http.post("/v1/complete", json=turn("anthropic/error-mid-stream"))
    assert response.status_code == 502
    body = response.json()
    assert "overloaded_error" in body["error"]["message"]
    assert body["message"]["stopReason"] == "error" and body["requestId"] == response.headers["x-request-id"]


def test_pi_door_ignores_client_base_url_and_headers(gateway, sim):
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


def test_timeouts_and_keepalive_comments_while_upstream_is_silent(gateway_factory):
    gw = gateway_factory(keepalive_interval=0.2, first_event_timeout=0.6, idle_timeout=0.6, retries=0)
    result = gw.stream(turn("anthropic/hang-before-headers"))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == "anthropic/hang-before-headers first-event timeout fired after 0.6s"
    assert "ping" in result.text
    result = gw.stream(turn("anthropic/hang-mid-stream"))
    assert result.terminal["errorMessage"] == "anthropic/hang-mid-stream idle timeout fired after 0.6s"
    assert result.message["content"][0]["text"]


def test_raw_sse_parse_matches(gateway):
    response = gateway.http.post("/v1/stream", json=turn("anthropic/text"))
    events = check_frames(parse_sse(response.text))
    assert events[-1]["type"] == "done"
