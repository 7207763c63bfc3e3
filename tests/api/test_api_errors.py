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
        ({"model": "has space", "context": {"messages": [{"role": "user", "content": "x"}]}}, "model"),
        (
            {"model": "anthropic/text", "fallback": [""], "context": {"messages": [{"role": "user", "content": "x"}]}},
            "fallback.0",
        ),
        ({"model": "anthropic/text", "context": {"messages": []}}, "context.messages"),
        ({"model": "anthropic/text"}, "context"),
        (
            {
                "model": "anthropic/text",
                "context": {"messages": [{"role": "toolResult", "toolName": "t", "content": []}]},
            },
            "context.messages.0.toolResult.toolCallId",
        ),
        (
            {"model": "anthropic/text", "context": {"messages": [{"role": "robot", "content": "x"}]}},
            "context.messages.0",
        ),
        (
            {
                "model": "anthropic/text",
                "context": {"messages": [{"role": "user", "content": "x"}]},
                "options": {"temperature": "hot"},
            },
            "options.temperature",
        ),
        (
            {
                "model": "anthropic/text",
                "context": {"messages": [{"role": "user", "content": "x"}]},
                "options": {"reasoning": "max"},
            },
            "options.reasoning",
        ),
        (
            {
                "model": "anthropic/text",
                "context": {"messages": [{"role": "user", "content": "x"}]},
                "options": {"maxTokens": -1},
            },
            "options.maxTokens",
        ),
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


def test_unknown_bare_model_is_404(gateway):
    error = error_of(gateway.http.post("/v1/stream", json=turn("no-slash")), 404)
    assert error["type"] == "model_not_found" and "no-slash" in error["message"] and error["param"] == "model"


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
    response = gateway.http.post("/api/stream", content=b"nope", headers={"content-type": "application/json"})
    assert response.status_code == 400 and isinstance(response.json()["error"], str)


def test_lone_surrogates_are_accepted_and_removed_before_the_upstream(gateway):
    from tests.conftest import marker

    m = marker()
    raw = (
        '{"model": "anthropic/text", "context": {"messages": [{"role": "user", "content": "%s cut \\ud83d here"}]}}' % m
    ).encode()
    response = gateway.http.post("/v1/stream", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200
    sent = gateway.sim.seen(m)[0]["body"]["messages"][0]["content"][-1]["text"]
    assert sent == f"{m} cut  here"


def _raw(text: str) -> bytes:
    """A body written by hand, so that JSON escapes such as a lone `\\ud83d` reach the gateway unchanged."""
    return text.encode()


_LONE = "\\ud83d"
_MSG = '{"role": "user", "content": "hi"}'


@pytest.mark.parametrize(
    "body, param",
    [
        (
            '{"model": "anthropic/text", "fallback": ["anthropic/te%sxt"], "context": {"messages": [%s]}}'
            % (_LONE, _MSG),
            "fallback.0",
        ),
        (
            '{"model": "anthropic/text", "context": {"messages": [%s], "tools": [{"name": "t", "description": "d%s"}]}}'
            % (_MSG, _LONE),
            "context.tools.0.description",
        ),
        (
            '{"model": "anthropic/text", "context": {"messages": [%s], "tools": [{"name": "t", "parameters": '
            '{"type": "object", "properties": {"a%s": {"type": "string"}}}}]}}' % (_MSG, _LONE),
            "context.tools.0.parameters.properties",
        ),
        (
            '{"model": "anthropic/text", "context": {"messages": [%s]}, "options": {"metadata": {"userId": "u%s"}}}'
            % (_MSG, _LONE),
            "options.metadata.userId",
        ),
        (
            '{"model": "anthropic/text", "context": {"messages": [%s, {"role": "assistant", "content": [{"type": "toolCall",'
            ' "id": "c1", "name": "t", "arguments": {"q": "x%s"}}]}]}}' % (_MSG, _LONE),
            "context.messages.1.content.0.arguments.q",
        ),
        (
            '{"model": "anthropic/text", "context": {"messages": [%s, {"role": "assistant", "content": [{"type": "thinking",'
            ' "thinking": "x%s", "thinkingSignature": "sig"}]}]}}' % (_MSG, _LONE),
            "context.messages.1.content.0.thinking",
        ),
    ],
)
@pytest.mark.parametrize("path", ["/v1/stream", "/v1/complete"])
def test_lone_surrogates_outside_message_text_are_422_naming_the_field(gateway, body, param, path):
    response = gateway.http.post(path, content=_raw(body), headers={"content-type": "application/json"})
    error = error_of(response, 422)
    assert error["type"] == "validation_error" and error["param"] == param
    assert "surrogate" in error["message"]


def test_pi_door_rejects_lone_surrogates_too(gateway):
    body = '{"model": {"provider": "anthropic", "id": "te%sxt"}, "context": {"messages": [%s]}}' % (_LONE, _MSG)
    response = gateway.http.post("/api/stream", content=_raw(body), headers={"content-type": "application/json"})
    assert response.status_code == 422 and "model.id" in response.json()["error"]


def test_lone_surrogates_in_the_system_prompt_are_removed(gateway):
    from tests.conftest import marker

    m = marker()
    body = (
        '{"model": "anthropic/text", "context": {"systemPrompt": "be %s brief\\udc00", "messages": '
        '[{"role": "user", "content": [{"type": "text", "text": "%s"}]}]}}' % (_LONE, m)
    )
    response = gateway.http.post("/v1/complete", content=_raw(body), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    system = gateway.sim.seen(m)[0]["body"]["system"]
    assert system[0]["text"] == "be  brief"


def test_json_deeper_than_the_parser_allows_is_413(gateway):
    raw = b'{"model": "anthropic/text", "options": {"metadata": {"a": ' + b"[" * 1100 + b"]" * 1100 + b"}}}"
    response = gateway.http.post("/v1/stream", content=raw, headers={"content-type": "application/json"})
    assert error_of(response, 413)["type"] == "payload_too_deep"


def test_every_validation_problem_is_listed(gateway):
    body = {"model": 5, "fallback": [1], "context": {"messages": [{"role": "user"}]}}
    error = error_of(gateway.http.post("/v1/stream", json=body), 422)
    assert error["param"] == "model"
    for part in ("model:", "fallback.0:", "context.messages.0.user.content:"):
        assert part in error["message"]
    assert "more)" not in error["message"]


def test_a_system_role_message_says_where_the_system_prompt_goes(gateway):
    body = {"model": "anthropic/text", "context": {"messages": [{"role": "system", "content": "be brief"}]}}
    error = error_of(gateway.http.post("/v1/stream", json=body), 422)
    assert error["param"] == "context.messages.0"
    assert "context.systemPrompt" in error["message"]


def _long_history(n: int) -> list[dict]:
    return [
        {"role": "user", "content": f"m{i}"}
        if i % 2 == 0
        else {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]}
        for i in range(n)
    ]


def test_a_long_history_validated_in_slices_equals_one_validation():
    import orjson

    from app.api.body import parse_model
    from app.contract.request import StreamRequest
    from app.doors.validation import SLICE

    raw = orjson.dumps({"model": "anthropic/text", "context": {"messages": _long_history(3 * SLICE + 7)}})
    assert parse_model(raw, StreamRequest, 64) == StreamRequest.model_validate(orjson.loads(raw))


def test_problems_in_a_long_history_name_their_message():
    import orjson

    from app.api.body import parse_model
    from app.contract.request import StreamRequest
    from app.doors.errors import BadRequest
    from app.doors.validation import SLICE

    history = _long_history(3 * SLICE)
    history[0] = {"role": "system", "content": "x"}
    history[2 * SLICE + 1] = {"role": "assistant", "content": [{"type": "text"}]}
    raw = orjson.dumps({"model": 5, "context": {"messages": history}})
    with pytest.raises(BadRequest) as caught:
        parse_model(raw, StreamRequest, 64)
    message = caught.value.message
    assert caught.value.param == "model"
    assert message.count("context.messages.0:") == 1 and "systemPrompt" in message
    assert f"context.messages.{2 * SLICE + 1}.assistant.content.0.text.text: Field required" in message


def test_a_path_without_its_api_prefix_names_the_path_it_meant(gateway):
    error = error_of(gateway.http.post("/chat/completions", json={}), 404)
    assert "did you mean POST /v1/chat/completions?" in error["message"] and error["type"] == "not_found"
    assert "did you mean POST /v1/messages?" in error_of(gateway.http.post("/v1/v1/messages", json={}), 404)["message"]
    assert "did you mean GET /v1/models?" in error_of(gateway.http.get("/models"), 404)["message"]
    assert "did you mean" not in error_of(gateway.http.get("/v2/nothing"), 404)["message"]


def test_the_root_sends_a_browser_to_the_console_when_served_else_to_the_api_reference(gateway, gateway_factory):
    response = gateway.http.get("/")
    assert response.status_code == 302 and response.headers["location"] == "/docs"
    with_console = gateway_factory(console=True)
    response = with_console.http.get("/")
    assert response.status_code == 302 and response.headers["location"] == "/console"
