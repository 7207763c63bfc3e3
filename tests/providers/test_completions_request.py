"""openai-completions request side and catalog: the body each vendor's compat produces, the requests a vendor
cannot honour, and which catalog providers are active."""

from __future__ import annotations

import json

import pytest

from app.catalog import Catalog
from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.openai_completions.compat import Compat
from app.providers.openai_completions.request import build_request, check_request, reasoning_level, tool_call_id_rule
from app.providers.registry import build_providers
from app.contract.refusals import RequestRejected
from app.settings import Settings

MODEL = ModelInfo("groq", "openai/gpt-oss-120b", Pricing(), max_tokens=65536, reasoning=True)
PNG = "iVBORw0KGgo="


def context(**extra) -> Context:
    return Context.model_validate(
        {"systemPrompt": "Be brief.", "messages": [{"role": "user", "content": "hi"}], **extra}
    )


def options(**values) -> StreamOptions:
    return StreamOptions.model_validate(values)


def test_defaults_suit_openai_and_a_vendor_names_only_its_differences():
    body = build_request(MODEL, context(), options(maxTokens=100, reasoning="high"), Compat())
    assert body["messages"][0] == {"role": "developer", "content": "Be brief."}
    assert body["max_completion_tokens"] == 100 and body["reasoning_effort"] == "high"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}

    compat = Compat.parse(
        {"maxTokensField": "max_tokens", "developerRole": False, "reasoningParam": "none", "streamUsage": False}
    )
    body = build_request(MODEL, context(), options(maxTokens=100, reasoning="high", temperature=0.3), compat)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["max_tokens"] == 100 and "max_completion_tokens" not in body
    assert "reasoning_effort" not in body and "reasoning" not in body and "stream_options" not in body
    assert body["temperature"] == 0.3  # no reasoning knob: the temperature goes


def test_max_tokens_are_capped_at_the_models_limit():
    assert build_request(MODEL, context(), options(maxTokens=1_000_000), Compat())["max_completion_tokens"] == 65536


def test_reasoning_levels_map_to_what_the_vendor_accepts():
    groq = Compat.parse({"reasoningEfforts": ["low", "medium", "high"]})
    assert reasoning_level(groq, "xhigh") == "high" and reasoning_level(groq, "minimal") == "low"
    assert reasoning_level(groq, "medium") == "medium"
    body = build_request(MODEL, context(), options(reasoning="minimal"), Compat.parse({"reasoningParam": "openrouter"}))
    assert body["reasoning"] == {"effort": "minimal"} and "reasoning_effort" not in body


def test_unknown_compat_keys_and_values_are_refused():
    with pytest.raises(ValueError, match="unknown compat key 'maxTokenField'"):
        Compat.parse({"maxTokenField": "max_tokens"})
    with pytest.raises(ValueError, match="maxTokensField"):
        Compat.parse({"maxTokensField": "max_output_tokens"})


def test_stop_and_tool_choice_are_mapped():
    tools = [{"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {}}}]
    body = build_request(
        MODEL, context(tools=tools), options(stop=["END"], toolChoice={"type": "tool", "name": "get_weather"}), Compat()
    )
    assert body["stop"] == ["END"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["tools"][0] == {"type": "function", "function": tools[0]}
    assert (
        build_request(MODEL, context(tools=tools), options(toolChoice="required"), Compat())["tool_choice"]
        == "required"
    )


@pytest.mark.parametrize(
    ("compat", "opts", "extra", "param"),
    [
        ({"stop": False}, {"stop": ["END"]}, {}, "options.stop"),
        ({"maxStop": 4}, {"stop": ["a", "b", "c", "d", "e"]}, {}, "options.stop"),
        ({"toolChoice": False}, {"toolChoice": "none"}, {}, "options.toolChoice"),
        ({"toolChoiceRequired": False}, {"toolChoice": "required"}, {}, "options.toolChoice"),
        ({}, {"toolChoice": {"type": "tool", "name": "missing"}}, {}, "options.toolChoice"),
        (
            {"images": False},
            {},
            {"messages": [{"role": "user", "content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}]},
            "context.messages",
        ),
    ],
)
def test_what_a_vendor_cannot_honour_is_rejected_before_any_call(compat, opts, extra, param):
    with pytest.raises(RequestRejected) as caught:
        check_request(MODEL, context(**extra), options(**opts), Compat.parse(compat))
    assert caught.value.param == param


def test_history_with_tool_calls_results_and_images():
    ctx = Context.model_validate(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image", "data": PNG, "mimeType": "image/png"},
                    ],
                },
                {
                    "role": "assistant",
                    "provider": "groq",
                    "api": "openai-completions",
                    "model": MODEL.id,
                    "stopReason": "toolUse",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "reasoning"},
                        {"type": "text", "text": "Checking."},
                        {"type": "toolCall", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}},
                    ],
                },
                {
                    "role": "toolResult",
                    "toolCallId": "call_1",
                    "toolName": "get_weather",
                    "content": [
                        {"type": "text", "text": "sunny"},
                        {"type": "image", "data": PNG, "mimeType": "image/png"},
                    ],
                },
            ]
        }
    )
    messages = build_request(MODEL, ctx, options(), Compat.parse({"toolResultName": True}))["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }
    assert messages[1] == {
        "role": "assistant",
        "content": "Checking.",
        "reasoning": "hmm",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
            }
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "name": "get_weather"}
    assert messages[3]["role"] == "user" and messages[3]["content"][1]["type"] == "image_url"
    # DeepSeek rejects reasoning in input: its compat drops it.
    dropped = build_request(MODEL, ctx, options(), Compat.parse({"thinkingReplay": "drop"}))["messages"][1]
    assert "reasoning" not in dropped and "reasoning_content" not in dropped


def test_openrouter_signature_goes_back_as_reasoning_details():
    ctx = Context.model_validate(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "provider": "groq",
                    "api": "openai-completions",
                    "model": MODEL.id,
                    "stopReason": "stop",
                    "content": [
                        {"type": "thinking", "thinking": "2+2", "thinkingSignature": "Et0BCkgI"},
                        {"type": "text", "text": "4"},
                    ],
                },
                {"role": "user", "content": "and 3+3?"},
            ]
        }
    )
    assistant = build_request(MODEL, ctx, options(), Compat.parse({"reasoningParam": "openrouter"}))["messages"][1]
    assert assistant["reasoning_details"] == [{"type": "reasoning.text", "text": "2+2", "signature": "Et0BCkgI"}]


def test_tool_call_ids_from_other_models_follow_the_vendors_rules():
    mistral = tool_call_id_rule(Compat.parse({"toolCallIdAlphanumeric": True, "toolCallIdLength": 9}))
    ids = {mistral("toolu_01ABC|fc_xyz"), mistral("call_ZR5UUuTt3pf61kjwAJIYdVMj"), mistral("abcDEF123")}
    assert all(len(i) == 9 and i.isalnum() for i in ids) and len(ids) == 3
    assert mistral("toolu_01ABC|fc_xyz") == mistral("toolu_01ABC|fc_xyz")  # deterministic: results follow
    openai = tool_call_id_rule(Compat())
    long_a, long_b = openai("x" * 80 + "a"), openai("x" * 80 + "b")
    assert len(long_a) == 40 and long_a != long_b and openai("call|with spaces") == "call_with_spaces"


def test_builtin_catalog_has_a_vendor_entry_with_valid_compat_for_each_vendor():
    catalog = Catalog.load()
    vendors = {"openrouter", "groq", "cerebras", "xai", "deepseek", "mistral", "together", "fireworks"}
    local = {"vllm", "ollama", "llamacpp", "lmstudio"}
    completions = {p.name: p for p in catalog.providers.values() if p.api == "openai-completions"}
    assert vendors | local <= set(completions)
    for name, info in completions.items():
        Compat.parse(info.compat)
        assert bool(info.key_env) == (name in vendors)
    for name in vendors:
        assert any(m.provider == name and m.pricing.input > 0 for m in catalog.listed()), name
    assert catalog.model("groq", "openai/gpt-oss-120b") is not None  # ids with "/"


def test_vendors_are_active_only_with_their_key_and_local_servers_only_with_their_base_url(monkeypatch):
    for var in ("GROQ_API_KEY", "OPENROUTER_API_KEY", "GATEWAY_VLLM_BASE_URL", "GATEWAY_OLLAMA_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    catalog = Catalog.load()
    assert not {"groq", "vllm", "ollama"} & set(build_providers(Settings(), catalog.providers))
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test")
    monkeypatch.setenv("GATEWAY_VLLM_BASE_URL", "http://127.0.0.1:9/v1")
    providers = build_providers(Settings(), catalog.providers)
    assert {"groq", "vllm"} <= set(providers) and "ollama" not in providers
    assert str(providers["vllm"].client.base_url).startswith("http://127.0.0.1:9/v1")
    assert str(providers["groq"].client.base_url).startswith("https://api.groq.com/openai/v1")


def test_demo_mode_offers_a_compat_provider_on_the_simulator(monkeypatch):
    from app.main import demo_settings

    monkeypatch.delenv("GATEWAY_COMPAT_BASE_URL", raising=False)
    assert "compat" not in build_providers(Settings(), Catalog.load().providers)  # keyless: only with a base URL
    providers = build_providers(demo_settings(Settings(port=8123)), Catalog.load().providers)
    assert providers["compat"].api == "openai-completions"
    assert str(providers["compat"].client.base_url) == "http://127.0.0.1:8123/_simulator/compat/v1/"
