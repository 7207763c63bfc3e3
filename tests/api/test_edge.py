"""The turn routes answered without FastAPI's stack (app/api/edge.py) answer exactly as FastAPI did."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from app.doors.registry import DoorTable
from app.main import create_app
from app.settings import Settings
from app.server.startup_messages import StartupError
from tests.conftest import turn

KEY = "edge-test-key"
AUTH = {"authorization": f"Bearer {KEY}"}

REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/stream", {"content": b"{not json", "headers": {**AUTH, "content-type": "application/json"}}),
    ("POST", "/v1/stream", {"json": [1, 2], "headers": AUTH}),
    ("POST", "/v1/stream", {"json": {"model": 5}, "headers": AUTH}),
    ("POST", "/v1/stream", {"json": turn("mystery/model-1"), "headers": AUTH}),
    ("POST", "/v1/stream", {"json": turn("anthropic/text")}),  # no key: 401
    ("POST", "/v1/stream", {"json": turn("anthropic/text"), "headers": {"authorization": "Bearer wrong"}}),
    ("POST", "/v1/stream", {"json": turn("anthropic/text", "x" * 5000), "headers": AUTH}),  # 413
    ("POST", "/v1/stream?x=1", {"json": {"model": "anthropic/text"}, "headers": AUTH}),
    ("POST", "/v1/stream/", {"json": turn("anthropic/text"), "headers": AUTH}),  # FastAPI's redirect, both ways
    ("POST", "/v1/complete", {"json": {"model": "anthropic/text"}, "headers": AUTH}),
    ("POST", "/api/stream", {"content": b"nope", "headers": AUTH}),
    ("POST", "//api/stream", {"content": b"nope", "headers": AUTH}),
    ("POST", "//api/stream", {"json": {"model": "x"}, "headers": AUTH}),
    ("POST", "/v1/chat/completions", {"json": {"model": "anthropic/text"}, "headers": AUTH}),
    (
        "POST",
        "/v1/chat/completions",
        {"json": {"model": "mystery/m", "messages": [{"role": "user", "content": "x"}]}, "headers": AUTH},
    ),
    ("POST", "/v1/messages", {"json": {"model": "anthropic/text"}, "headers": {"x-api-key": KEY}}),
    ("POST", "/v1/messages", {"json": {"model": "anthropic/text"}}),
    ("POST", "/v1beta/models/anthropic/text:generateContent", {"json": {"contents": []}, "headers": AUTH}),
    (
        "POST",
        "/v1beta/models/anthropic%2Ftext:streamGenerateContent?alt=sse",
        {"json": {"contents": 1}, "headers": AUTH},
    ),
    ("POST", "/v1/models/mystery/m:generateContent?key=" + KEY, {"json": {"contents": [{"parts": [{"text": "x"}]}]}}),
    ("POST", "/v1beta/models/anthropic/text:generateContent", {"json": {"contents": []}}),  # no key: 401
    ("GET", "/v1/stream", {"headers": AUTH}),  # 405, FastAPI's either way
    ("POST", "/v1/nothing", {"headers": AUTH}),  # 404
]


def _seen(response: Any) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in response.headers.items() if k not in ("x-request-id", "date")}
    request_id = response.headers["x-request-id"]
    assert request_id.startswith("req_")
    # Each request has its own id, in the header and (Anthropic's shape) in the body: compared as the same.
    return response.status_code, headers, response.content.replace(request_id.encode(), b"<request id>")


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(api_keys=KEY, max_body_bytes=4096)


@pytest.mark.parametrize("method, path, kwargs", REQUESTS)
def test_turn_routes_answer_as_fastapi_did(gw, method, path, kwargs):
    app = gw.server.app
    direct = app.turn_routes
    assert direct is not None
    fast = _seen(gw.http.request(method, path, **kwargs))
    app.turn_routes = None  # the whole request through FastAPI's stack, as before
    try:
        slow = _seen(gw.http.request(method, path, **kwargs))
    finally:
        app.turn_routes = direct
    assert fast == slow


def test_a_turn_is_served_directly_with_its_request_id(gw):
    response = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers={**AUTH, "x-request-id": "mine"})
    assert response.status_code == 200
    request_id = response.headers["x-request-id"]
    assert request_id.startswith("req_") and response.headers.get_list("x-request-id") == [request_id]
    assert response.json()["requestId"] == request_id


def test_turn_endpoints_are_the_declared_post_routes_without_dependencies(gw):
    routes = {c.path: c.original_route for c in iter_route_contexts(gw.server.app.routes)
              if isinstance(c.original_route, APIRoute) and c.original_route.methods == {"POST"}}  # fmt: skip
    direct = gw.server.app.turn_routes
    endpoints = {**direct.endpoints, **{template: endpoint for _, template, endpoint in direct.patterns}}
    assert set(endpoints) == {route.path for _, route in DoorTable().turn_routes()}
    for path, endpoint in endpoints.items():
        route = routes[path]
        assert route.methods == {"POST"} and route.endpoint is endpoint
        assert not route.dependencies and not route.dependant.dependencies and route.body_field is None


def test_middleware_the_fast_path_would_skip_is_refused_at_start_up():
    from starlette.middleware.gzip import GZipMiddleware
    from starlette.testclient import TestClient

    app = create_app(Settings())
    app.add_middleware(GZipMiddleware)
    with pytest.raises(StartupError, match="GZipMiddleware would not see the turn routes"):
        with TestClient(app):
            pass
    assert app.turn_routes is None
