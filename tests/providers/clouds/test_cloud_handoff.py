"""One conversation carried across the clouds (CONTRACT §9a, "handoff across vendors"): Bedrock Claude → Vertex
Gemini → Azure Responses → Azure Chat Completions → Bedrock again → Vertex Claude → Anthropic → Vertex Gemini
again, each hop a thinking turn and a tool-call turn (with its results), through the clouds' SDKs inside the
gateway against the simulator's cloud wires (the demo mode's cloud entries, `app.catalog.demo_clouds`, with their test
credentials).

Each upstream request is read as the simulator received it (the views of `tests/providers/test_handoff.py`): every tool
call of the history is there with its result after it (ids the target accepts), and a thinking block goes
back as thinking, with its signature, only to the provider and model that made it; to any other it is plain
text and its signature is never sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.catalog.demo_clouds import demo_cloud_catalog
from app.providers.clouds.azure import DEMO_KEY_ENV
from simulator.azure import AZURE_KEY
from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY
from simulator.vertex import service_account_info
from tests.conftest import marker, turn
from tests.providers.test_handoff import SAFE_ID, VIEWS

# provider → the view of its upstream body (`tests.providers.test_handoff.VIEWS`: by api family)
VIEW_OF = {
    "bedrock": "anthropic",
    "vertex-claude": "anthropic",
    "anthropic": "anthropic",
    "vertex-gemini": "google",
    "azure-openai": "openai",
    "azure-chat": "compat",
}
HOPS = [
    "bedrock",
    "vertex-gemini",
    "azure-openai",
    "azure-chat",
    "bedrock",
    "vertex-claude",
    "anthropic",
    "vertex-gemini",
]


@pytest.fixture(scope="module")
def clouds(gateway_factory, sim, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cloud-handoff")
    account = folder / "service-account.json"
    account.write_text(json.dumps(service_account_info(f"{sim.url}/vertex/token", project="demo-project")))
    catalog = demo_cloud_catalog(sim.url)
    azure = next(p for p in catalog["providers"] if p["name"] == "azure-openai")
    catalog["providers"].append({**azure, "name": "azure-chat", "api": "openai-completions"})
    path = folder / "catalog.json"
    path.write_text(json.dumps(catalog))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account))
        env.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
        env.setenv(DEMO_KEY_ENV, AZURE_KEY)
        for name in (
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_DEFAULT_PROFILE",
            "AWS_BEARER_TOKEN_BEDROCK",
            "ANTHROPIC_BEDROCK_BASE_URL",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
        ):
            env.delenv(name, raising=False)
        env.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY_ID)
        env.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET_ACCESS_KEY)
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield gateway_factory(catalog=str(path))


def _thinking_blocks(history: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(provider, model, block) of each signed thinking block of the history's assistant turns."""
    return [
        (m["provider"], m["model"], b)
        for m in history
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "thinking" and b.get("thinkingSignature")
    ]


def _check_upstream(sent: dict[str, Any], provider: str, model: str, history: list[dict[str, Any]]) -> None:
    """The request `provider`/`model` received for `history` is a valid history for it."""
    thinking, texts, calls, results = VIEWS[VIEW_OF[provider]](sent)
    made = [(p, m, b) for p, m, b in _thinking_blocks(history)]
    own = [b for p, m, b in made if (p, m) == (provider, model)]
    others = [b for p, m, b in made if (p, m) != (provider, model)]
    assert len(thinking) == len(own), (provider, model, thinking)  # only this provider+model's thinking is thinking
    text = json.dumps(sent)
    own_signatures = {b["thinkingSignature"] for b in own}
    for block in others:  # another's thinking goes as plain text, its signature never
        assert block["thinking"] in texts, (provider, block["thinking"])
        if block["thinkingSignature"] not in own_signatures:
            assert block["thinkingSignature"] not in text, (provider, model, block["thinkingSignature"])
    expected_calls = sum(
        1 for m in history if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall"
    )
    assert len(calls) == expected_calls and sorted(results) == sorted(calls), (provider, calls, results)
    if VIEW_OF[provider] != "google":  # Gemini matches calls by name
        assert all(SAFE_ID.match(c) for c in calls), calls


def _step(clouds: Any, history: list[dict[str, Any]], provider: str, model: str) -> dict[str, Any]:
    """One turn of `provider`/`model` after `history` (plus a new user message); its upstream request checked."""
    m = marker()
    asked = [*history, {"role": "user", "content": f"{model} on {provider}: {m}"}]
    result = clouds.stream({**turn(f"{provider}/{model}"), "context": {"messages": asked}})
    assert result.terminal["type"] == "done", (provider, model, result.terminal.get("errorMessage"))
    [seen] = [s for s in clouds.sim.seen(m) if s["endpoint"] == "stream"]
    _check_upstream(seen["body"], provider, model, history)
    history.extend([asked[-1], result.message])
    return result.message


def test_one_conversation_crosses_every_cloud_with_valid_histories_and_signatures_only_to_their_maker(clouds):
    history: list[dict[str, Any]] = []
    for provider in HOPS:
        thought = _step(clouds, history, provider, "thinking")
        assert any(b["type"] == "thinking" and b.get("thinkingSignature") for b in thought["content"]), (
            provider,
            thought,
        )
        called = _step(clouds, history, provider, "tools")
        calls = [b for b in called["content"] if b["type"] == "toolCall"]
        assert called["stopReason"] == "toolUse" and len(calls) == 2, (provider, called)
        history.extend(
            {
                "role": "toolResult",
                "toolCallId": c["id"],
                "toolName": c["name"],
                "content": [{"type": "text", "text": f"{c['name']} answered on {provider}"}],
                "isError": False,
            }
            for c in calls
        )
    # The second visits found their first visit's thinking: Bedrock and Vertex Gemini each got one back, signed.
    assert [p for p, _, _ in _thinking_blocks(history)].count("bedrock") == 2
    assert [p for p, _, _ in _thinking_blocks(history)].count("vertex-gemini") == 2
