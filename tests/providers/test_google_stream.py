"""The Gemini path end to end: gateway under uvicorn → google-genai SDK → simulator, over loopback HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import re


from simulator import scenarios
from tests.conftest import HERE, PROVIDER_KEYS, marker, turn

FAST = {"throttleMs": 0}  # every wire delta is its own event, so sequences are exact


def reply(prompt: str) -> list[str]:
    return scenarios._words(f"Hello from the simulator. You said: {prompt}")


def assert_usage_sums(usage: dict) -> None:
    assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]


def test_text_turn(gateway):
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


def test_cache_read_is_not_counted_twice(gateway):
    result = gateway.stream(turn("google/text;input=40;cache_read=60"))
    usage = result.terminal["usage"]
    assert (usage["input"], usage["cacheRead"]) == (40, 60)  # promptTokenCount 100 includes the 60 cached
    assert_usage_sums(usage)


def test_thinking_with_signature(gateway):
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


def test_parallel_tool_calls_without_ids_get_unique_ids(gateway):
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


def test_tool_call_with_finish_reason_in_a_later_chunk(gateway):
    m = marker()
    result = gateway.stream(turn("google/tool-stop-later", m))
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert result.terminal["reason"] == "toolUse"  # STOP on the wire
    assert result.message["content"][0]["arguments"] == {"city": "Paris", "unit": "celsius"}
    assert gateway.sim.wait(m)["framesSent"] == 2  # the call, then the empty-text chunk with finishReason


def test_missing_args_are_an_empty_object(gateway):
    result = gateway.stream(turn("google/tool-empty-args"))
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert result.events[2]["delta"] == "{}"
    call = result.message["content"][0]
    assert call["name"] == "get_version" and call["arguments"] == {} and call["id"].startswith("get_version_1_")
    assert result.terminal["reason"] == "toolUse"


def test_safety_stop_is_an_error_that_names_the_reason(gateway):
    result = gateway.stream(turn("google/safety"))
    assert result.types() == ["start", "text_start", "text_delta", "error"]
    assert result.terminal["reason"] == "error"
    assert result.terminal["errorMessage"] == "google/safety stopped: finishReason=SAFETY"
    assert result.message["content"] == [{"type": "text", "text": "Partial "}]  # the finishing chunk's text is kept


def test_malformed_function_call_is_an_error(gateway):
    m = marker()
    result = gateway.stream(turn("google/tools-malformed", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"].startswith(
        "google/tools-malformed stopped: finishReason=MALFORMED_FUNCTION_CALL"
    )
    assert len(gateway.sim.seen(m)) == 1  # not retried


def test_max_tokens_is_length(gateway):
    result = gateway.stream(turn("google/max-tokens"))
    assert result.terminal["type"] == "done" and result.terminal["reason"] == "length"
    assert result.message["stopReason"] == "length" and result.message["content"][0]["text"]


def test_provider_error_mid_stream(gateway):
    m = marker()
    result = gateway.stream(turn("google/error-mid-stream", m, options=FAST))
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "error"]
    assert result.terminal["errorMessage"] == "google/error-mid-stream sent an error chunk: 503 UNAVAILABLE: Overloaded"
    assert result.message["content"][0]["text"] == "".join(reply(m)[:2])
    assert len(gateway.sim.seen(m)) == 1  # content was sent: no retry


def test_provider_error_before_content_is_retried(gateway):
    m = marker()
    result = gateway.stream(turn("google/error-before-content", m))
    assert result.types() == ["error"]
    assert "sent an error chunk: 503 UNAVAILABLE: Overloaded (after 2 attempts)" in result.terminal["errorMessage"]
    assert len(gateway.sim.seen(m)) == 2


def test_http_429_surfaces_retry_after_ms(gateway):
    m = marker()
    result = gateway.stream(turn("google/http-429;retry_after_ms=300", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == (
        "google/http-429;retry_after_ms=300 returned HTTP 429: RESOURCE_EXHAUSTED: simulated rate limit"
        " (after 2 attempts) retry-after-ms=300"
    )
    seen = gateway.sim.seen(m)
    assert [s["status"] for s in seen] == [429, 429]  # one retry by the gateway, none by the SDK
    job = gateway.job(result.terminal["message"]["requestId"])
    assert [a.http_status for a in job.attempts] == [429, 429]


def test_http_400_is_not_retried(gateway):
    m = marker()
    result = gateway.stream(turn("google/http-400", m))
    assert (
        result.terminal["errorMessage"] == "google/http-400 returned HTTP 400: INVALID_ARGUMENT: simulated bad request"
    )
    assert len(gateway.sim.seen(m)) == 1


def test_truncated_stream_is_an_error(gateway):
    result = gateway.stream(turn("google/truncated"))
    assert result.terminal["type"] == "error"
    assert result.terminal["errorMessage"] == "google/truncated stream ended without a finishReason (truncated)"
    assert result.message["content"][0]["text"]


def test_connection_reset_is_an_error(gateway):
    result = gateway.stream(turn("google/reset"))
    assert result.terminal["type"] == "error" and "connection lost" in result.terminal["errorMessage"]


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


def test_replay_text_usage_growing(gateway):
    result = replay(gateway, "text-usage-growing")
    assert result.types() == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert result.message["content"] == [{"type": "text", "text": "\n".join(str(i) for i in range(1, 31))}]
    assert result.terminal["reason"] == "stop"
    assert usage_of(result) == (18, 80 + 35, 0) and result.terminal["usage"]["totalTokens"] == 133


def test_replay_thought_parts_then_text(gateway):
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


def test_replay_parallel_calls_split_across_chunks(gateway):
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


def test_replay_single_call_without_id(gateway):
    result = replay(gateway, "tool-no-id")
    assert result.types() == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    call = result.message["content"][0]
    assert (call["name"], call["arguments"]) == ("get_capital", {"country": "France"})
    assert re.fullmatch(r"get_capital_1_[0-9a-f]{8}", call["id"])
    assert result.terminal["reason"] == "toolUse"
    assert usage_of(result) == (52, 5, 0) and result.terminal["usage"]["totalTokens"] == 57


def test_replay_gemini3_call_with_id_and_empty_args(gateway):
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


def test_replay_gemini3_signature_on_a_final_empty_part(gateway):
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


# ----------------------------------------------------------------------------- request side


def camel(value):
    """The SDK writes some nested keys in snake_case (Google's JSON parser takes both): compare in camelCase."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda g: g.group(1).upper(), k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def test_request_body_sent_to_gemini(gateway):
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


def test_gemini3_request_uses_levels_and_signs_foreign_calls(gateway):
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
