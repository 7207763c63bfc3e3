"""Google Vertex AI (CONTRACT §9a, docs/clouds/vertex.md): Claude through `anthropic`'s `AsyncAnthropicVertex`
and Gemini through `google-genai` with `vertexai=True`, inside the gateway, credentials from Application
Default Credentials (a service-account file whose `token_uri` is the simulator's token endpoint, which
checks the signed JWT assertion), against the simulator's Vertex paths over loopback HTTP."""

from __future__ import annotations

import json

import httpx
import pytest

from simulator.scenarios import token_count
from simulator.vertex import service_account_info
from tests.conftest import marker, turn

CLOUD = {"kind": "vertex", "project": "sim-project"}
KINDS = {"claude": "anthropic-messages", "gemini": "google-generative-ai"}
PUBLISHER = {"claude": "anthropic", "gemini": "google"}
REGION = {"claude": "us-east5", "gemini": "global"}


def providers(base: str) -> list[dict]:
    out = []
    for suffix in ("", "-expiry", "-bad"):
        for kind, api in KINDS.items():
            out.append(
                {"name": f"vx-{kind}{suffix}", "api": api, "baseUrl": base, "cloud": {**CLOUD, "region": REGION[kind]}}
            )
    return out


@pytest.fixture(scope="module")
def vertex(gateway_factory, sim, tmp_path_factory):
    folder = tmp_path_factory.mktemp("vertex")
    token_uri = f"{sim.url}/vertex/token"
    good, bad = folder / "sa.json", folder / "sa-unknown-key.json"
    good.write_text(json.dumps(service_account_info(token_uri)))
    bad.write_text(json.dumps(service_account_info(token_uri, registered=False)))
    path = folder / "catalog.json"
    path.write_text(json.dumps({"providers": providers(f"{sim.url}/vertex")}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(good))
        env.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
        gateway = gateway_factory(catalog=str(path))
        gateway.bad_credentials = bad
        yield gateway


def vertex_seen(sim, model: str) -> list[dict]:
    return [e for e in sim.http.get("/vertex/_sim/requests").json() if e["model"] == model]


def record(gateway, request_id: str) -> dict:
    gateway.job(request_id)
    response = gateway.http.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    return response.json()


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
def test_a_429_resource_exhausted_is_retried_then_served(vertex, kind):
    m = marker()
    model = f"text;throttle=1;t={m}"
    result = vertex.stream(turn(f"vx-{kind}/{model}", m))
    assert result.terminal["type"] == "done", result.text
    assert len(vertex_seen(vertex.sim, model)) == 2
    first, second = record(vertex, result.headers["x-request-id"])["attempts"]
    assert first["httpStatus"] == 429 and "Resource exhausted" in first["errorMessage"]
    assert second["outcome"] == "done"


@pytest.mark.parametrize("kind", KINDS)
def test_an_expired_token_is_refreshed_for_the_next_turn_while_an_open_stream_goes_on(vertex, kind):
    """Tokens issued already inside google-auth's refresh margin: the turn sent while a first one streams
    gets a new token (refreshed off the event loop), and the first stream, opened with the old one, ends done."""
    sim = vertex.sim
    sim.http.post("/vertex/_sim/lifetime", params={"seconds": 0})
    try:
        before = sim.http.get("/vertex/_sim/issued").json()["issued"]
        first_marker, second_marker = marker(), marker()
        body = turn(f"vx-{kind}-expiry/slow;n=40;delay_ms=10;t={first_marker}", first_marker)
        with httpx.Client(base_url=vertex.url, timeout=30) as client:
            with client.stream("POST", "/v1/stream", json=body) as response:
                lines = response.iter_lines()
                next(line for line in lines if "text_delta" in line)
                second = vertex.stream(turn(f"vx-{kind}-expiry/text;t={second_marker}", second_marker))
                rest = list(lines)
        assert second.terminal["type"] == "done", second.text
        assert any('"type":"done"' in line.replace(" ", "") for line in rest)
        assert sim.http.get("/vertex/_sim/issued").json()["issued"] - before >= 2  # one per turn at least
        [first_seen], [second_seen] = sim.seen(first_marker), sim.seen(second_marker)
        assert first_seen["authSha256"] != second_seen["authSha256"] and first_seen["completed"] is True
    finally:
        sim.http.post("/vertex/_sim/lifetime", params={"seconds": 3600})


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_that_leaves_closes_the_vertex_stream(vertex, kind):
    m = marker()
    body = turn(f"vx-{kind}/slow;n=200;delay_ms=20;t={m}", m)
    with httpx.Client(base_url=vertex.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data:") and "text_delta" in line:
                    break
    entry = vertex.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and entry["completed"] is False


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
