"""A catalog provider with its own name on a built-in api (`anthropic-eu` on `anthropic-messages`, …) keeps
same-model replay: signed thinking, reasoning items and text ids go back to the vendor as they came, exactly as
for the built-in provider of that api (issue 11, defect 5). Request builders compare the message's provider
with the serving model's provider, never with a vendor name."""

from __future__ import annotations

import base64
import json

import pytest

from tests.conftest import PROVIDER_KEYS, marker, turn

NAMED = {
    "providers": [
        {"name": "anthropic-eu", "api": "anthropic-messages", "keyEnv": "ANTHROPIC_EU_TEST_KEY"},
        {"name": "openai-eu", "api": "openai-responses", "keyEnv": "OPENAI_EU_TEST_KEY"},
        {"name": "google-eu", "api": "google-generative-ai", "keyEnv": "GOOGLE_EU_TEST_KEY"},
        {"name": "compat-eu", "api": "openai-completions", "compat": {"reasoningField": "reasoning_content"}},
    ],
}


@pytest.fixture(scope="module")
def named(gateway_factory, sim, tmp_path_factory):
    path = tmp_path_factory.mktemp("named") / "catalog.json"
    path.write_text(json.dumps(NAMED))
    base_urls = {
        "anthropic-eu": f"{sim.url}/anthropic",
        "openai-eu": f"{sim.url}/openai/v1",
        "google-eu": f"{sim.url}/google",
        "compat-eu": f"{sim.url}/compat/v1",
    }
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_EU_TEST_KEY", PROVIDER_KEYS["anthropic"])
        env.setenv("OPENAI_EU_TEST_KEY", PROVIDER_KEYS["openai"])
        env.setenv("GOOGLE_EU_TEST_KEY", PROVIDER_KEYS["google"])
        return gateway_factory(catalog=str(path), base_urls=base_urls)


def second_turn(gateway, model: str) -> tuple[dict, dict]:
    """Run a first turn on `model`, replay its message to the same model; (first message, body sent the 2nd time)."""
    first = gateway.stream(turn(model, options={"throttleMs": 0}))
    assert first.terminal["type"] == "done", first.text
    message = first.message
    assert message["provider"] == model.partition("/")[0]
    m = marker()
    body = {
        "model": model,
        "context": {"messages": [{"role": "user", "content": "hi"}, message, {"role": "user", "content": m}]},
    }
    second = gateway.stream(body)
    assert second.terminal["type"] == "done", second.text
    [seen] = gateway.sim.seen(m)
    return message, seen["body"]


def test_anthropic_eu_replays_signed_thinking(named):
    message, body = second_turn(named, "anthropic-eu/thinking")
    thinking = message["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinkingSignature"]
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": thinking["thinking"],
        "signature": thinking["thinkingSignature"],
    }


def test_openai_eu_replays_reasoning_items_and_text_ids(named):
    message, body = second_turn(named, "openai-eu/thinking")
    item = json.loads(message["content"][0]["thinkingSignature"])
    sent = body["input"]
    assert sent[1] == item  # the reasoning item, as it came
    assert sent[2]["type"] == "message" and sent[2]["id"] == json.loads(message["content"][1]["textSignature"])["id"]


def test_google_eu_replays_thought_signatures(named):
    message, body = second_turn(named, "google-eu/thinking")
    thinking = message["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinkingSignature"]
    model_turn = body["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0] == {
        "text": thinking["thinking"],
        "thought": True,
        "thoughtSignature": thinking["thinkingSignature"],
    }
    assert base64.b64decode(model_turn["parts"][0]["thoughtSignature"]) == b"sig-sim-thinking-42"


def test_compat_eu_replays_thinking_in_the_field_it_came_in(named):
    message, body = second_turn(named, "compat-eu/thinking")
    thinking = message["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinkingSignature"] == "reasoning_content"
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["reasoning_content"] == thinking["thinking"]


def test_another_provider_on_the_same_api_is_another_model(named):
    """The same model id on `anthropic` and `anthropic-eu` are different models: signatures do not cross."""
    first = named.stream(turn("anthropic-eu/thinking", options={"throttleMs": 0}))
    m = marker()
    body = {
        "model": "anthropic/thinking",
        "context": {"messages": [{"role": "user", "content": "hi"}, first.message, {"role": "user", "content": m}]},
    }
    assert named.stream(body).terminal["type"] == "done"
    assistant = named.sim.seen(m)[0]["body"]["messages"][1]
    assert assistant["content"][0] == {"type": "text", "text": first.message["content"][0]["thinking"]}


def test_a_keyless_provider_with_a_catalog_base_url_is_served_from_the_catalog_alone(gateway_factory, sim, tmp_path):
    """docs/adapters/openai-completions.md: a catalog entry and no code. A local server's entry with its
    `baseUrl` needs no `GATEWAY_<NAME>_BASE_URL` repeating it."""
    path = tmp_path / "catalog.json"
    path.write_text(
        json.dumps(
            {"providers": [{"name": "local-box", "api": "openai-completions", "baseUrl": f"{sim.url}/compat/v1"}]}
        )
    )
    gateway = gateway_factory(catalog=str(path))
    result = gateway.stream(turn("local-box/text", options={"throttleMs": 0}))
    assert result.terminal["type"] == "done", result.text
    assert result.message["provider"] == "local-box"
