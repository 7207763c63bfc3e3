"""The openai-completions path end to end: gateway under uvicorn → official `openai` SDK → simulator
(`/compat/v1/chat/completions`), over loopback; vendor quirks and the request body the vendor receives."""

from __future__ import annotations

from tests.conftest import marker, turn


def calls(result):
    return [(b["id"], b["name"], b["arguments"]) for b in result.message["content"] if b["type"] == "toolCall"]


def test_text_turn_and_request_body(gateway):
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


def test_cached_tokens_are_not_counted_as_input(gateway):
    usage = gateway.stream(turn("compat/text;input=40;cache_read=60")).terminal["usage"]
    assert (usage["input"], usage["cacheRead"]) == (40, 60)


def test_thinking_from_reasoning_content_or_reasoning(gateway):
    for field in ("reasoning_content", "reasoning"):
        result = gateway.stream(turn(f"compat/thinking;reasoning_field={field}"))
        thinking = result.message["content"][0]
        assert thinking == {
            "type": "thinking",
            "thinking": "The user greets me. I should greet back.",
            "thinkingSignature": field,
        }


def test_encrypted_reasoning_details_are_the_signature(gateway):
    thinking = gateway.stream(turn("compat/redacted-thinking")).message["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinkingSignature"] == "EncryptedBlob=="


def test_tool_calls_by_index_and_without_index(gateway):
    expected = [
        ("toolu_sim_weather", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("toolu_sim_time", "get_time", {"timezone": "Europe/Paris"}),
    ]
    for model in ("compat/tools", "compat/tools;quirk=no_index"):
        result = gateway.stream(turn(model))
        assert result.terminal["reason"] == "toolUse" and calls(result) == expected


def test_usage_repeated_or_in_the_finish_chunk_counts_once(gateway):
    for quirk in ("usage_twice", "usage_in_finish"):
        result = gateway.stream(turn(f"compat/text;quirk={quirk}"))
        assert result.terminal["type"] == "done"
        assert result.terminal["usage"]["input"] == 25 and result.terminal["usage"]["output"] > 0


def test_missing_finish_reason_is_a_truncated_error(gateway):
    for model in ("compat/text;quirk=no_finish", "compat/truncated"):
        result = gateway.stream(turn(model))
        assert result.terminal["type"] == "error"
        assert "without a finish_reason" in result.terminal["errorMessage"]


def test_content_filter_is_an_error_that_says_so(gateway):
    result = gateway.stream(turn("compat/safety"))
    assert result.terminal["type"] == "error" and "content filter" in result.terminal["errorMessage"]


def test_in_stream_error_keeps_the_vendors_message(gateway):
    result = gateway.stream(turn("compat/error-mid-stream"))
    assert result.terminal["type"] == "error"
    assert (
        result.terminal["errorMessage"] == "compat/error-mid-stream sent an error event: overloaded_error: Overloaded"
    )


def test_http_errors_carry_retry_hints_and_are_retried(gateway):
    m = marker()
    result = gateway.stream(turn("compat/http-429;retry_after_ms=5", m))
    assert "returned HTTP 429: rate_limit_error: simulated rate limit" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 2  # retried once (retries=1)
    m = marker()
    result = gateway.stream(turn("compat/http-400", m))
    assert "HTTP 400" in result.terminal["errorMessage"] and len(gateway.sim.seen(m)) == 1


def test_unsupported_request_is_refused_before_any_call(gateway_factory, tmp_path):
    catalog = tmp_path / "catalog.json"
    catalog.write_text('{"providers": [{"name": "compat", "api": "openai-completions", "compat": {"stop": false}}]}')
    gw = gateway_factory(catalog=str(catalog))
    m = marker()
    result = gw.stream(turn("compat/text", m, options={"stop": ["END"]}))
    assert result.status == 400 and "stop sequences" in result.text
    assert gw.sim.seen(m) == []
