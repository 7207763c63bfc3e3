"""The door framework over loopback HTTP: auth headers every door accepts, each door's error shape, and the
door a record and a metric name."""

from __future__ import annotations

import typing

import pytest

from app.doors import anthropic_messages, gemini, openai_responses, pi, unified
from app.doors.registry import DoorName, DoorTable
from tests.conftest import marker, turn

KEY = "sk-client-door-0001"


@pytest.fixture(scope="module")
def keyed(gateway_factory):
    return gateway_factory(api_keys=f"doors:{KEY}")


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}])
def test_bearer_and_x_api_key_both_authenticate(keyed, headers):
    result = keyed.stream(turn("anthropic/text", marker()), headers=headers)
    assert result.status == 200 and result.terminal["type"] == "done"
    record = keyed.http.get(f"/v1/requests/{result.headers['x-request-id']}", headers=headers)
    assert record.status_code == 200 and record.json()["apiKeyId"] == "doors"


def test_a_wrong_x_api_key_is_refused(keyed):
    result = keyed.stream(turn("anthropic/text"), headers={"x-api-key": "sk-wrong"})
    assert result.status == 401 and result.json()["error"]["type"] == "authentication_error"


def test_each_door_answers_errors_in_its_own_shape(keyed):
    auth = {"x-api-key": KEY}
    unified = keyed.http.post("/v1/stream", json={"model": "anthropic/text"}, headers=auth)
    assert unified.status_code == 422
    assert unified.json()["error"]["param"] == "context"
    pi = keyed.http.post("/api/stream", json={"model": {"provider": "nope", "id": "x"}, "context": {"messages": [
        {"role": "user", "content": "hi"}]}}, headers=auth)  # fmt: skip
    assert pi.status_code == 404 and isinstance(pi.json()["error"], str)
    pi_auth = keyed.http.post("/api/stream", json={})
    assert pi_auth.status_code == 401 and isinstance(pi_auth.json()["error"], str)


def test_records_and_metrics_name_the_door(gateway):
    body = {
        "model": {"provider": "anthropic", "id": "text"},
        "context": {"messages": [{"role": "user", "content": marker()}]},
    }
    result = gateway.stream(body, path="/api/stream")
    request_id = result.headers["x-request-id"]
    gateway.job(request_id)
    assert gateway.http.get(f"/v1/requests/{request_id}").json()["door"] == "pi"
    unified = gateway.stream(turn("anthropic/text", marker()))
    gateway.job(unified.headers["x-request-id"])
    assert gateway.http.get(f"/v1/requests/{unified.headers['x-request-id']}").json()["door"] == "unified"
    metrics = gateway.http.get("/metrics").text
    assert 'door="pi"' in metrics and 'door="unified"' in metrics
    by_door = gateway.http.get("/v1/requests", params={"door": "pi", "limit": 200}).json()["records"]
    assert request_id in [r["requestId"] for r in by_door] and {r["door"] for r in by_door} == {"pi"}
    assert gateway.http.get("/v1/requests", params={"door": "smtp"}).status_code == 422


def test_the_registry_names_every_door_and_finds_a_door_by_its_path():
    assert typing.get_args(DoorName) == (
        "unified",
        "pi",
        "openai-chat",
        "anthropic-messages",
        "openai-responses",
        "gemini",
    )
    door_at = DoorTable().door_at
    assert door_at("/v1/stream") is door_at("/v1/complete") is unified.DOOR
    assert door_at("//api/stream") is door_at("/api/stream/") is pi.DOOR
    assert door_at("/v1/messages") is anthropic_messages.DOOR
    assert door_at("/v1/responses") is openai_responses.DOOR
    assert door_at("/v1/messages/count_tokens") is None and door_at("/v1/models") is None
    # Routes with path parameters match as patterns: the Gemini door's model may hold `/` and `:`.
    for path in ("/v1beta/models/anthropic/text:streamGenerateContent", "/v1/models/fast:generateContent",
                 "/v1beta/models/models/bedrock/anthropic.claude:0:countTokens"):  # fmt: skip
        assert door_at(path) is gemini.DOOR
    assert door_at("/v1beta/models/x:embedContent") is None and door_at("/v2/models/x:generateContent") is None


OUT_OF_BOUNDS = [
    ("/v1/messages", {"max_tokens": 1_000_001}, 400, "max_tokens"),
    ("/v1/messages", {"max_tokens": 10, "stop_sequences": ["x" * 1001]}, 400, "stop_sequences.0"),
    ("/v1/chat/completions", {"max_tokens": 1_000_001}, 400, "max_tokens"),
    ("/v1/chat/completions", {"max_completion_tokens": 1_000_001}, 400, "max_completion_tokens"),
    ("/v1/chat/completions", {"stop": ["x" * 1001]}, 400, "stop"),
    ("/api/stream", {"options": {"maxTokens": 1_000_001}}, 422, "options.maxTokens"),
    ("/v1/stream", {"options": {"maxTokens": 1_000_001}}, 422, "options.maxTokens"),
    ("/v1/stream", {"options": {"stop": ["x" * 1001]}}, 422, "options.stop.0"),
]


@pytest.mark.parametrize("path, fields, status, field", OUT_OF_BOUNDS, ids=[f"{c[0]} {c[3]}" for c in OUT_OF_BOUNDS])
def test_values_the_unified_request_refuses_are_4xx_in_each_doors_shape_never_500(keyed, path, fields, status, field):
    m = marker()
    if path == "/api/stream":
        body = {
            "model": {"provider": "anthropic", "id": "text"},
            "context": {"messages": [{"role": "user", "content": m}]},
        }
    elif path == "/v1/stream":
        body = turn("anthropic/text", m)
        body["options"] = {}
    else:
        body = {"model": "anthropic/text", "messages": [{"role": "user", "content": m}]}
    for key, value in fields.items():
        body[key] = {**body.get(key, {}), **value} if isinstance(value, dict) else value
    response = keyed.http.post(path, json=body, headers={"x-api-key": KEY})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    message = error if path == "/api/stream" else error["message"]
    assert message.startswith(field) and not keyed.sim.seen(m)
    if path == "/v1/messages":
        assert response.json()["type"] == "error" and error["type"] == "invalid_request_error"
