"""Bad input gets a clear 4xx JSON error before streaming starts, never a 500 (CONTRACT §1)."""

from __future__ import annotations

import pytest

from tests.conftest import turn


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"].startswith("req_")
    body = response.json()["error"]
    assert set(body) == {"type", "message", "param"} and body["message"]
    return body


def test_invalid_json(gateway):
    response = gateway.http.post("/v1/stream", content=b"{not json", headers={"content-type": "application/json"})
    assert error_of(response, 400)["type"] == "invalid_json"


def test_body_must_be_an_object(gateway):
    assert error_of(gateway.http.post("/v1/stream", json=[1, 2]), 400)["type"] == "invalid_request"


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": 5, "context": {"messages": [{"role": "user", "content": "x"}]}}, "model"),
        ({"model": "no-slash", "context": {"messages": [{"role": "user", "content": "x"}]}}, "model"),
        ({"model": "anthropic/text", "context": {"messages": []}}, "context.messages"),
        ({"model": "anthropic/text"}, "context"),
        ({"model": "anthropic/text", "context": {"messages": [{"role": "toolResult", "toolName": "t", "content": []}]}},
         "context.messages.0.toolResult.toolCallId"),
        ({"model": "anthropic/text", "context": {"messages": [{"role": "robot", "content": "x"}]}}, "context.messages.0"),
        ({"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": "x"}]}, "options": {"temperature": "hot"}},
         "options.temperature"),
        ({"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": "x"}]}, "options": {"reasoning": "max"}},
         "options.reasoning"),
        ({"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": "x"}]}, "options": {"maxTokens": -1}},
         "options.maxTokens"),
    ],
)
def test_schema_errors_name_the_field(gateway, body, param):
    error = error_of(gateway.http.post("/v1/stream", json=body), 422)
    assert error["type"] == "validation_error"
    assert error["param"] == param


def test_unknown_fields_are_ignored(gateway):
    body = turn("anthropic/text", surprise={"x": 1})
    body["context"]["messages"][0]["futureField"] = True
    assert gateway.stream(body).terminal["type"] == "done"


def test_unknown_provider_is_404(gateway):
    error = error_of(gateway.http.post("/v1/stream", json=turn("mystery/model-1")), 404)
    assert error["type"] == "model_not_found" and "mystery" in error["message"] and error["param"] == "model"


def test_oversized_body_is_413(gateway_factory):
    gw = gateway_factory(max_body_bytes=2048)
    error = error_of(gw.http.post("/v1/stream", json=turn("anthropic/text", "x" * 5000)), 413)
    assert error["type"] == "payload_too_large"


def test_deeply_nested_body_is_413(gateway):
    nested: dict = {}
    node = nested
    for _ in range(200):
        node["a"] = {}
        node = node["a"]
    body = turn("anthropic/text", options={"metadata": nested})
    assert error_of(gateway.http.post("/v1/stream", json=body), 413)["type"] == "payload_too_deep"


def test_unknown_route_and_method(gateway):
    assert error_of(gateway.http.get("/v2/nothing"), 404)["type"] == "not_found"
    assert error_of(gateway.http.get("/v1/stream"), 405)["type"] == "method_not_allowed"


def test_complete_rejects_bad_input_the_same_way(gateway):
    assert error_of(gateway.http.post("/v1/complete", json={"model": "anthropic/text"}), 422)["param"] == "context"


def test_pi_door_errors_are_strings(gateway):
    response = gateway.http.post("/api/stream", content=b"nope")
    assert response.status_code == 400 and isinstance(response.json()["error"], str)


def test_lone_surrogates_are_accepted_and_removed_before_the_upstream(gateway):
    from tests.conftest import marker

    m = marker()
    raw = ('{"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": "%s cut \\ud83d here"}]}}' % m).encode()
    response = gateway.http.post("/v1/stream", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200
    sent = gateway.sim.seen(m)[0]["body"]["messages"][0]["content"][-1]["text"]
    assert sent == f"{m} cut  here"
