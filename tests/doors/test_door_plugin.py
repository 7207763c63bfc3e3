"""A door is one package and one line: a small door defined here, in the test, and served by an app built with
it (`create_app(doors=(*DOORS, TINY))`), nothing changed under `app/`, gets its turn route (answered on the fast
path), its OpenAPI entries, the records' and the metrics' `door`, its error shape and its model list."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterator, Mapping

import pytest

from app.api.openapi import SPEC_PATH
from app.contract.messages import Context, UserMessage
from app.contract.request import StreamOptions, StreamRequest
from app.core.settled import SettledTurn
from app.doors.base import Door, DoorRequest, DoorRoute, ModelListing, ModelRoute, TurnView
from app.doors.errors import BadRequest
from app.doors.registry import DOORS
from app.main import create_app
from tests.conftest import Gateway, marker, settings_for
from tests.servers import ServerThread

KEY = "sk-tiny-door-0001"
AUTH = {"Authorization": f"Bearer {KEY}"}
SAY_PATH = "/tiny/v1/say"
MODELS_PATH = "/tiny/v1/models"


# --- the door: `{"model", "say", "stream"?}` in, one `data: <text>` line per text delta out -------------------


def _decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    if not isinstance(body.get("model"), str) or not isinstance(body.get("say"), str):
        raise BadRequest(400, "invalid_request_error", "say: a model and a string to say are required", param="say")
    context = Context(messages=[UserMessage(content=body["say"])])
    unified = StreamRequest(model=body["model"], context=context, options=StreamOptions(throttle_ms=0))
    return DoorRequest(unified=unified, stream=body.get("stream", True) is not False)


class TinyEncoder:
    hold_until_start = False

    def __init__(self, request_id: str, request: DoorRequest, turn: TurnView) -> None:
        self.request_id = request_id

    def encode(self, event: dict[str, Any]) -> bytes:
        if event["type"] == "text_delta":
            return b"data: " + event["delta"].encode() + b"\n\n"
        if event["type"] == "done":
            return b"data: [END]\n\n"
        if event["type"] == "error":
            return b"data: [ERROR] " + (event.get("errorMessage") or "").encode() + b"\n\n"
        return b""

    def ping(self) -> bytes:
        return b": ping\n\n"

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        said = "".join(block["text"] for block in result.message["content"] if block["type"] == "text")
        return (200, {"said": said}) if result.outcome == "done" else (502, _error_body_of(502, result.error_message))

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return None


def _error_body_of(status: int, message: str) -> dict[str, Any]:
    return {"tiny_error": message, "code": status}


def _error_body(error: BadRequest) -> dict[str, Any]:
    return _error_body_of(error.status, error.message)


def _json(schema: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}


def _operation() -> dict[str, Any]:
    return {
        "requestBody": {"required": True, "content": _json("TinySay")},
        "responses": {"200": {"description": "one data line per text delta"},
                      "401": {"description": "no key", "content": _json("TinyError")}},
    }  # fmt: skip


def _model_of(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for entry in entries:
        if entry["id"] == name:
            return {"tiny_model": name}
    raise BadRequest(404, "not_found", f"model: {name} is not listed", param="model")


TINY = Door(
    name="tiny",
    routes=(DoorRoute(SAY_PATH, "tiny_say", "Tiny door: one data line per text delta", ("doors",), _operation),),
    decode=_decode,
    encoder=TinyEncoder,
    error_body=_error_body,
    frames_carry_ids=False,
    prose_paths=(("say",),),
    schemas={
        "TinySay": {"type": "object", "required": ["model", "say"], "properties": {"say": {"type": "string"}}},
        "TinyError": {"type": "object", "properties": {"tiny_error": {"type": "string"}, "code": {"type": "integer"}}},
    },
    models=ModelListing(
        answer=lambda entries: {"tiny_models": [entry["id"] for entry in entries]},
        asked=lambda headers, query: "x-tiny-client" in headers,
        routes=(
            ModelRoute(
                MODELS_PATH,
                "list_tiny_models",
                "Tiny door: the models",
                "The gateway's models, by name.",
                {200: {"description": "the names"}},
            ),
            ModelRoute(
                f"{MODELS_PATH}/{{model:path}}",
                "get_tiny_model",
                "Tiny door: one model",
                "One model, by name.",
                {200: {"description": "the name"}, 404: {"description": "not listed"}},
            ),
        ),
        model=_model_of,
    ),
)


# --- an app that serves it ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(sim) -> Iterator[Gateway]:
    app = create_app(settings_for(sim.url, api_keys=f"tiny:{KEY}"), doors=(*DOORS, TINY))
    server = ServerThread(app, "gateway").start()
    gateway = Gateway(server, sim)
    server.call(asyncio.wait_for(gateway.state.serving.wait(), 30), timeout=35)
    yield gateway
    server.stop()


def test_its_route_serves_a_turn_streamed_and_whole(tiny):
    m = marker()
    response = tiny.http.post(SAY_PATH, json={"model": "anthropic/text", "say": m}, headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    lines = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "[END]" and m in "".join(lines[:-1])
    assert tiny.sim.seen(m)[0]["vendor"] == "anthropic"
    assert tiny.server.app.turn_routes.match({"type": "http", "method": "POST", "path": SAY_PATH}) is not None
    whole = tiny.http.post(SAY_PATH, json={"model": "anthropic/text", "say": m, "stream": False}, headers=AUTH)
    assert whole.status_code == 200 and whole.json()["said"] == "".join(lines[:-1])


def test_records_and_metrics_name_it(tiny):
    response = tiny.http.post(SAY_PATH, json={"model": "anthropic/text", "say": marker()}, headers=AUTH)
    request_id = response.headers["x-request-id"]
    tiny.job(request_id)
    assert tiny.http.get(f"/v1/requests/{request_id}", headers=AUTH).json()["door"] == "tiny"
    assert 'door="tiny"' in tiny.http.get("/metrics").text


def test_errors_come_in_its_shape(tiny):
    unauthenticated = tiny.http.post(SAY_PATH, json={"model": "anthropic/text", "say": "hi"})
    assert unauthenticated.status_code == 401 and unauthenticated.json()["code"] == 401
    assert set(unauthenticated.json()) == {"tiny_error", "code"}
    undecodable = tiny.http.post(SAY_PATH, json={"model": "anthropic/text"}, headers=AUTH)
    assert undecodable.status_code == 400 and undecodable.json()["tiny_error"].startswith("say:")
    not_json = tiny.http.post(SAY_PATH, content=b"{nope", headers={**AUTH, "content-type": "application/json"})
    assert not_json.status_code == 400 and set(not_json.json()) == {"tiny_error", "code"}
    unknown = tiny.http.post(SAY_PATH, json={"model": "mystery/model-1", "say": "hi"}, headers=AUTH)
    assert unknown.status_code == 404 and set(unknown.json()) == {"tiny_error", "code"}
    # The built-in doors keep theirs.
    assert "type" in tiny.http.post("/v1/messages", json={}, headers=AUTH).json()


def test_its_model_list_on_its_own_routes_and_on_v1_models(tiny):
    openai_ids = [entry["id"] for entry in tiny.http.get("/v1/models", headers=AUTH).json()["data"]]
    listed = tiny.http.get(MODELS_PATH, headers=AUTH)
    assert listed.status_code == 200 and listed.json() == {"tiny_models": openai_ids}
    asked = tiny.http.get("/v1/models", headers={**AUTH, "x-tiny-client": "1"})
    assert asked.json() == {"tiny_models": openai_ids}
    assert tiny.http.get(f"{MODELS_PATH}/anthropic/text", headers=AUTH).json() == {"tiny_model": "anthropic/text"}
    missing = tiny.http.get(f"{MODELS_PATH}/nope/nothing", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json() == {"tiny_error": "model: nope/nothing is not listed", "code": 404}
    refused = tiny.http.get(MODELS_PATH)
    assert refused.status_code == 401 and set(refused.json()) == {"tiny_error", "code"}
    # Another door's clients still get theirs on the shared route.
    assert "models" in tiny.http.get("/v1/models", headers={"x-goog-api-key": KEY}).json()


def test_its_openapi_entries_join_the_document(tiny):
    spec = tiny.http.get("/openapi.json").json()
    say = spec["paths"][SAY_PATH]["post"]
    assert say["operationId"] == "tiny_say_tiny_v1_say_post" and say["tags"] == ["doors"]
    assert say["requestBody"]["content"] == _json("TinySay") and say["responses"]["401"]["content"] == _json(
        "TinyError"
    )
    assert say["security"] == [{"bearer": []}]
    assert {"TinySay", "TinyError"} <= set(spec["components"]["schemas"])
    listing = spec["paths"][MODELS_PATH]["get"]
    assert listing["summary"] == "Tiny door: the models" and listing["description"] == "The gateway's models, by name."
    one = spec["paths"][f"{MODELS_PATH}/{{model}}"]["get"]
    assert [p["name"] for p in one["parameters"]] == ["model"] and set(one["responses"]) >= {"200", "404"}
    # Everything the built-in doors describe is still there, as it was.
    committed = json.loads(SPEC_PATH.read_text())
    assert set(committed["paths"]) <= set(spec["paths"])
    assert all(spec["paths"][path] == item for path, item in committed["paths"].items())
