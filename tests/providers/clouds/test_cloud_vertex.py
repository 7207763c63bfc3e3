"""Google Vertex AI (CONTRACT §9a, docs/clouds/vertex.md): Claude through `anthropic`'s `AsyncAnthropicVertex`
and Gemini through `google-genai` with `vertexai=True`, inside the gateway, credentials from Application
Default Credentials (a service-account file whose `token_uri` is the simulator's token endpoint, which
checks the signed JWT assertion), against the simulator's Vertex paths over loopback HTTP. The gateway: conftest.py;
what every cloud does alike (throttling, a client that leaves, expiring tokens): test_clouds.py."""

from __future__ import annotations

import json

import pytest

from simulator.scenarios import token_count
from simulator.vertex import service_account_info
from tests.conftest import marker, turn
from tests.providers.clouds.conftest import KINDS, PUBLISHER, REGION, record, vertex_seen


@pytest.mark.parametrize("kind", KINDS)
def test_a_text_turn_goes_to_the_models_vertex_path_with_a_token_from_the_service_account(vertex, kind):
    m = marker()
    model = f"text;t={m}"
    result = vertex.stream(turn(f"vx-{kind}/{model}", m))
    assert result.terminal["type"] == "done", result.text
    assert m in "".join(e.get("delta", "") for e in result.events if e["type"] == "text_delta")
    [seen] = vertex_seen(vertex.sim, model)
    assert (seen["project"], seen["location"]) == ("sim-project", REGION[kind])
    assert f"/publishers/{PUBLISHER[kind]}/models/" in seen["path"]
    rec = record(vertex, result.headers["x-request-id"])
    assert (rec["cloud"], rec["region"]) == ("vertex", REGION[kind])
    assert "ya29." not in json.dumps(rec) and "ya29." not in result.text  # no token anywhere


@pytest.mark.parametrize("kind", KINDS)
def test_thinking_and_parallel_tool_calls(vertex, kind):
    thinking = vertex.stream(turn(f"vx-{kind}/thinking", options={"throttleMs": 0, "reasoning": "high"}))
    assert thinking.terminal["type"] == "done", thinking.text
    block = thinking.message["content"][0]
    assert block["type"] == "thinking" and block["thinking"]
    if kind == "claude":  # Vertex returns Anthropic's own signature
        assert block["thinkingSignature"] == "sig-sim-thinking-42"
    tools = vertex.stream(turn(f"vx-{kind}/tools"))
    assert tools.terminal["type"] == "done", tools.text
    calls = [b for b in tools.message["content"] if b["type"] == "toolCall"]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"] and all(c["arguments"] for c in calls)


@pytest.mark.parametrize("kind", KINDS)
def test_a_service_account_google_refuses_is_reported_clearly_without_the_key(vertex, kind, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(vertex.bad_credentials))  # read at the first request
    result = vertex.stream(turn(f"vx-{kind}-bad/text"))
    assert result.terminal["type"] == "error", result.text
    message = result.terminal["errorMessage"]
    assert message.startswith(f"vx-{kind}-bad/text returned HTTP 401: Google credentials refused or missing: "), message
    assert "Invalid JWT Signature." in message
    rec = record(vertex, result.headers["x-request-id"])
    assert len(rec["attempts"]) == 1 and "PRIVATE KEY" not in json.dumps(rec) and "PRIVATE KEY" not in result.text


def counted(sim, m: str) -> list[dict]:
    return [seen for seen in sim.seen(m) if seen["endpoint"] == "count"]


def test_a_claude_count_goes_to_vertexs_count_tokens_raw_predict(vertex):
    """The Messages door's count_tokens on a Vertex Claude model: the SDK's Vertex client sends it to
    `…/publishers/anthropic/models/count-tokens:rawPredict` with the model and `anthropic_version` in the body."""
    m = marker()
    model = f"text;t={m}"
    response = vertex.http.post(
        "/v1/messages/count_tokens",
        json={
            "model": f"vx-claude/{model}",
            "system": "You are terse.",
            "messages": [{"role": "user", "content": f"hi {m}"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
        },
    )
    assert response.status_code == 200, response.text
    [seen] = counted(vertex.sim, m)
    assert response.json() == {"input_tokens": token_count(seen["body"])}  # Vertex's number, unchanged
    assert seen["body"]["model"] == model and seen["body"]["anthropic_version"] and seen["body"]["system"]
    [call] = vertex_seen(vertex.sim, model)
    assert (
        call["path"]
        == f"/vertex/v1/projects/sim-project/locations/{REGION['claude']}/publishers/anthropic/models/count-tokens:rawPredict"
    )


@pytest.mark.parametrize("door", ["gemini", "messages"])
def test_a_gemini_count_is_sent_in_vertexs_count_tokens_shape(vertex, door):
    """Vertex's `countTokens` takes contents, systemInstruction, tools and generationConfig at the top level (the
    simulator refuses the Gemini API's `generateContentRequest` wrapper, as Vertex does): all of them counted."""
    m = marker()
    model = f"text;t={m}"
    if door == "gemini":
        response = vertex.http.post(
            f"/v1beta/models/vx-gemini/{model}:countTokens",
            json={
                "generateContentRequest": {
                    "contents": [{"role": "user", "parts": [{"text": f"hi {m}"}]}],
                    "systemInstruction": {"parts": [{"text": "You are terse."}]},
                    "tools": [
                        {
                            "functionDeclarations": [
                                {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
                            ]
                        }
                    ],
                    "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
                }
            },
        )
        field = "totalTokens"
    else:
        response = vertex.http.post(
            "/v1/messages/count_tokens",
            json={
                "model": f"vx-gemini/{model}",
                "system": "You are terse.",
                "messages": [{"role": "user", "content": f"hi {m}"}],
                "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
                "tool_choice": {"type": "auto"},
            },
        )
        field = "input_tokens"
    assert response.status_code == 200, response.text
    [seen] = counted(vertex.sim, m)
    assert response.json()[field] == token_count(seen["body"])
    body = seen["body"]
    assert (
        set(body) <= {"contents", "systemInstruction", "tools", "generationConfig"}
        and "generateContentRequest" not in body
    )
    assert body["systemInstruction"] and body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    [call] = vertex_seen(vertex.sim, model)
    assert call["path"].endswith(f"/publishers/google/models/{model}:countTokens")


def test_vertex_refuses_the_gemini_apis_count_shape(vertex):
    """The simulator is as strict as Vertex: the Gemini Developer API's `generateContentRequest` is an unknown field."""
    from google.oauth2 import service_account
    import google.auth.transport.requests

    info = service_account_info(f"{vertex.sim.url}/vertex/token")
    credentials = service_account.Credentials.from_service_account_info(
        info, scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    credentials.refresh(google.auth.transport.requests.Request())
    response = vertex.sim.http.post(
        "/vertex/v1/projects/sim-project/locations/global/publishers/google/models/text:countTokens",
        json={"generateContentRequest": {"model": "publishers/google/models/text", "contents": []}},
        headers={"Authorization": f"Bearer {credentials.token}"},
    )
    assert response.status_code == 400 and response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert 'Unknown name "generateContentRequest"' in response.json()["error"]["message"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_throttled_vertex_count_is_a_429_asked_once(vertex, kind):
    m = marker()
    model = f"text;throttle=1;t={m}"
    response = vertex.http.post(
        "/v1/messages/count_tokens", json={"model": f"vx-{kind}/{model}", "messages": [{"role": "user", "content": m}]}
    )
    assert response.status_code == 429, response.text
    assert "Resource exhausted" in response.json()["error"]["message"]
    assert len(vertex_seen(vertex.sim, model)) == 1
