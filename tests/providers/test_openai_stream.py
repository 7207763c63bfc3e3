"""The OpenAI Responses path end to end: gateway under uvicorn → official `openai` SDK → simulator, over loopback."""

from __future__ import annotations

import hashlib
import json


from tests.conftest import PROVIDER_KEYS, marker, turn

REPLY = "Hello from the simulator. You said: "


def deltas(result, kind: str, index: int | None = None) -> list[str]:
    return [e["delta"] for e in result.events if e["type"] == kind and (index is None or e["contentIndex"] == index)]


def test_text_turn(gateway):
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


def test_cached_tokens_are_not_counted_as_input(gateway):
    result = gateway.stream(turn("openai/text;input=40;cache_read=60"))
    usage = result.terminal["usage"]
    assert (usage["input"], usage["cacheRead"]) == (40, 60)  # the wire said input_tokens=100, cached_tokens=60
    assert usage["totalTokens"] == 100 + usage["output"]


def test_thinking_summary_with_a_replayable_signature(gateway):
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


def test_redacted_reasoning_is_an_empty_signed_thinking_block(gateway):
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


def test_parallel_tool_calls_with_fragmented_arguments(gateway):
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


def test_arguments_sent_only_whole_are_one_delta(gateway):
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


def test_malformed_arguments_are_an_error(gateway):
    result = gateway.stream(turn("openai/tools-malformed"))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"]
    for part in ("openai/tools-malformed", "toolu_sim_bad|fc_toolu_sim_bad", "get_weather", "not valid JSON"):
        assert part in message
    assert "toolcall_end" not in result.types()
    assert result.message["content"] == []


def test_output_cap_is_length(gateway):
    for model in ("openai/incomplete", "openai/max-tokens"):
        result = gateway.stream(turn(model))
        assert result.types()[-2:] == ["text_end", "done"]
        assert result.terminal["type"] == "done" and result.terminal["reason"] == "length"
        assert result.message["stopReason"] == "length"
    usage = gateway.stream(turn("openai/incomplete")).terminal["usage"]
    assert (usage["input"], usage["output"]) == (25, 4)


def test_refusal_is_an_error_that_says_so(gateway):
    result = gateway.stream(turn("openai/refusal"))
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]
    assert result.terminal["errorMessage"] == "openai/refusal refused: the response is a refusal"
    assert result.message["content"][0]["text"] == "I can't help with that."
    assert result.terminal["usage"]["output"] == 6  # the refused response still counts
    safety = gateway.stream(turn("openai/safety")).terminal
    assert safety["type"] == "error" and "content filter" in safety["errorMessage"]


def test_provider_error_mid_stream(gateway):
    m = marker()
    result = gateway.stream(turn("openai/error-mid-stream", m))
    assert result.terminal["type"] == "error"
    assert (
        result.terminal["errorMessage"] == "openai/error-mid-stream sent an error event: overloaded_error: Overloaded"
    )
    assert result.message["content"][0]["type"] == "text" and result.message["content"][0]["text"]
    assert len(gateway.sim.seen(m)) == 1  # content was sent: no retry


def test_response_failed_before_content_is_retried_then_an_error(gateway):
    m = marker()
    result = gateway.stream(turn("openai/error-before-content", m))
    assert result.types() == ["error"]
    assert (
        "openai/error-before-content response failed: overloaded_error: Overloaded" in result.terminal["errorMessage"]
    )
    assert len(gateway.sim.seen(m)) == 2


def test_http_429_surfaces_retry_after_ms(gateway):
    m = marker()
    result = gateway.stream(turn("openai/http-429;retry_after_ms=300", m))
    assert result.types() == ["error"]
    message = result.terminal["errorMessage"]
    assert "openai/http-429;retry_after_ms=300 returned HTTP 429: rate_limit_error: simulated rate limit" in message
    assert message.endswith(" retry-after-ms=300")
    seen = gateway.sim.seen(m)
    assert len(seen) == 2  # one retry (tests run with GATEWAY_RETRIES=1)


def test_http_400_is_not_retried(gateway):
    m = marker()
    result = gateway.stream(turn("openai/http-400", m))
    assert "HTTP 400: invalid_request_error: simulated bad request" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 1


def test_truncated_stream_is_an_error(gateway):
    result = gateway.stream(turn("openai/truncated"))
    assert result.terminal["type"] == "error"
    assert result.terminal["errorMessage"] == "openai/truncated stream ended before response.completed (truncated)"
    assert result.message["content"][0]["text"]


def test_unknown_wire_event_is_skipped(gateway):
    result = gateway.stream(turn("openai/unknown-event"))
    assert result.terminal["type"] == "done" and result.message["content"][0]["text"].startswith(REPLY)


def test_late_frames_after_completed_are_dropped_and_counted(gateway):
    result = gateway.stream(turn("openai/late-frames"))
    assert result.terminal["type"] == "done"
    assert "late" not in result.message["content"][0]["text"] and len(result.message["content"]) == 1
    job = gateway.job(result.headers["x-request-id"])
    assert job.turn.late_frames > 0 and job.turn.outcome == "done"


def test_connection_refused_is_a_transport_error(gateway_factory):
    gw = gateway_factory(openai_base_url="http://127.0.0.1:9/openai/v1", retries=0)
    result = gw.stream(turn("openai/text"))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"].startswith("openai/text connection failed")


# ------------------------------------------------------------------------------------ recorded samples


def test_replay_text_nonascii(gateway):
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


def test_replay_reasoning_summary_text(gateway):
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


def test_replay_reasoning_tool(gateway):
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


def test_replay_tools_parallel(gateway):
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


def test_replay_tool_fragmented_early_format(gateway):
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


# ------------------------------------------------------------------------------------ the request


def test_request_body_sent_to_openai(gateway):
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
