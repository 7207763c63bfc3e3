"""Hostile upstream values (issue 24, items 10, 12 and 13), end to end over loopback HTTP.

A small raw server stands in for a vendor (or a proxy in front of one) and answers what a well-behaved vendor
never would: an error that echoes the key it was sent, values of the wrong type, a line without end. The
gateway must keep every key out of what it emits or stores, treat a malformed upstream as an upstream error
(its kind and message say what came, fallback applies) and bound what it buffers of one SSE event.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from app.logs import JsonFormatter
from tests.conftest import HERE, PROVIDER_KEYS, marker, turn
from tests.servers import ServerThread


def _sse(*events: dict[str, Any], named: bool = False) -> bytes:
    """SSE frames of `events` (with `event:` lines naming each one's `type` when `named`, as Anthropic does)."""
    out = b""
    for event in events:
        if named:
            out += f"event: {event['type']}\n".encode()
        out += b"data: " + json.dumps(event).encode() + b"\n\n"
    return out


def _chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


_MESSAGE_START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                                       "model": "m", "usage": {"input_tokens": 3, "output_tokens": 1}}}
_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}

# What each malformed case streams, and what the error must say it sent.
MALFORMED = {
    "tool-index-list": (
        _sse(_chunk({"role": "assistant"}), _chunk({"tool_calls": [{"index": [0], "id": "c1", "function": {"name": "f", "arguments": "{}"}}]})),
        "sent a tool call index that is not an integer: [0]",
    ),
    "tool-index-dict": (
        _sse(_chunk({"role": "assistant"}), _chunk({"tool_calls": [{"index": {"i": 0}, "id": "c1", "function": {"name": "f"}}]})),
        "sent a tool call index that is not an integer: {'i': 0}",
    ),
    "thinking-int": (
        _sse(_MESSAGE_START, {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": 5}}, named=True),
        "sent a thinking block's thinking that is not a string: 5",
    ),
    "call-name-list": (
        _sse(_CREATED, {"type": "response.output_item.added", "output_index": 0, "item": {
            "id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "c1", "name": ["f"], "arguments": ""}}),
        "sent a function_call's name that is not a string: ['f']",
    ),
    "stop-reason-list": (  # a value no check names: still an upstream error saying what failed, never internal
        _sse(_MESSAGE_START, {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}, "usage": {"output_tokens": 1}},
             {"type": "message_stop"}, named=True),
        "sent a message_stop event the gateway could not read (TypeError",
    ),
}


class RawVendor:
    """The raw server's state: what each echo request carried, and the bytes each huge-line stream sent."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.finished = threading.Event()


def _raw_app(state: RawVendor) -> Starlette:
    async def malformed(request: Request) -> Response:
        body, _ = MALFORMED[request.path_params["case"]]
        return Response(body, media_type="text/event-stream")

    async def echo(request: Request) -> Response:
        # A proxy that echoes the credentials it was sent in its error message.
        seen = {k: v for k, v in request.headers.items() if k in ("authorization", "x-api-key", "x-goog-api-key")}
        seen["key"] = request.query_params.get("key", "")
        text = f"invalid credentials: {json.dumps(seen)}"
        return JSONResponse({"error": {"type": "authentication_error", "code": 401, "status": "UNAUTHENTICATED",
                                       "message": text}}, status_code=401)

    return Starlette(routes=[
        Route("/malformed/{case}/{path:path}", malformed, methods=["POST"]),
        Route("/echo/{path:path}", echo, methods=["POST"]),
    ])


@pytest.fixture(scope="module")
def raw():
    state = RawVendor()
    server = ServerThread(_raw_app(state), "raw-vendor").start()
    server.state = state
    yield server
    server.stop()


# ------------------------------------------------------------------------------------------------ item 12

CASE_PROVIDER = {"tool-index-list": "compat", "tool-index-dict": "compat", "thinking-int": "anthropic",
                 "call-name-list": "openai", "stop-reason-list": "anthropic"}


def _pointed_at(provider: str, base: str) -> dict[str, Any]:
    """Settings that send `provider`'s requests to `base` (the raw server)."""
    if provider == "compat":
        return {"base_urls": {"compat": f"{base}/v1"}}
    return {f"{provider}_base_url": base + ("/v1" if provider == "openai" else "")}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_value_of_the_wrong_type_is_a_malformed_upstream_and_the_turn_falls_back(gateway_factory, raw, case):
    provider = CASE_PROVIDER[case]
    gw = gateway_factory(retries=0, **_pointed_at(provider, f"{raw.url}/malformed/{case}"))
    fallback = "google/text"  # the simulator, reached as usual
    result = gw.stream(turn(f"{provider}/some-model", marker(), fallback=[fallback]))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert result.message["provider"] == "google"
    job = gw.job(result.headers["x-request-id"])
    first = job.attempts[0]
    assert first.kind == "malformed" and first.outcome == "error"
    assert MALFORMED[case][1] in first.error_message, first.error_message
    assert first.error_message.startswith(f"{provider}/some-model sent ")
    assert "internal error" not in first.error_message


@pytest.mark.parametrize("header", ["retry_after=inf", "retry_after_ms=1e400", "retry_after=1e400", "retry_after=nan"])
@pytest.mark.parametrize("provider", ["anthropic", "openai", "google", "compat"])
def test_a_retry_after_of_infinity_is_capped_and_retry_and_fallback_still_apply(gateway_factory, provider, header):
    gw = gateway_factory(retries=1, retry_after_cap_ms=20)
    result = gw.stream(turn(f"{provider}/http-429;{header}", marker(), fallback=["anthropic/text"]))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    job = gw.job(result.headers["x-request-id"])
    assert [a.kind for a in job.attempts[:2]] == ["http", "http"]  # retried, then fell back
    assert job.attempts[-1].outcome == "done" and job.attempts[-1].provider == "anthropic"
    assert all(a.retry_after_ms is None or a.retry_after_ms <= 86_400_000 for a in job.attempts)


# ------------------------------------------------------------------------------------------------ item 10

GROQ_KEY = "gsk-hostile-test-GROQKEY-0123456789"


class _Lines(logging.Handler):
    """Every log line as the gateway's JSON formatter writes it."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines():
    handler = _Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="module")
def echo_gateway(gateway_factory, raw, tmp_path_factory):
    """Every provider, a catalog one with a `keyEnv` key included, behind a proxy that echoes credentials."""
    catalog = json.loads((HERE / "catalog.json").read_text())
    catalog["providers"].append({"name": "groq", "api": "openai-completions", "keyEnv": "HOSTILE_TEST_GROQ_API_KEY"})
    catalog["models"].append({"provider": "groq", "id": "llama", "contextWindow": 8192, "maxTokens": 1024,
                              "cost": {"input": 0.1, "output": 0.1}})
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(catalog))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("HOSTILE_TEST_GROQ_API_KEY", GROQ_KEY)
    echo = f"{raw.url}/echo"
    gw = gateway_factory(
        retries=0, catalog=str(path), api_keys="tenant:tenant-key-SECRET",
        anthropic_base_url=echo, openai_base_url=f"{echo}/v1", google_base_url=echo,
        base_urls={"compat": f"{echo}/v1", "groq": f"{echo}/v1"},
    )
    yield gw
    monkeypatch.undo()


ALL_KEYS = (*PROVIDER_KEYS.values(), GROQ_KEY)
TENANT = {"Authorization": "Bearer tenant-key-SECRET"}


@pytest.mark.parametrize("model", ["anthropic/some-model", "openai/some-model", "google/some-model", "groq/llama"])
def test_a_provider_key_echoed_in_an_error_is_redacted_everywhere(echo_gateway, log_lines, model):
    gw = echo_gateway
    result = gw.stream(turn(model, marker()), headers=TENANT)
    message = result.terminal["errorMessage"]
    assert result.terminal["type"] == "error" and "HTTP 401" in message and "[redacted]" in message, message
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    complete = gw.http.post("/v1/complete", json=turn(model, marker()), headers=TENANT)
    chat = gw.http.post("/v1/chat/completions", headers=TENANT,
                        json={"model": model, "messages": [{"role": "user", "content": "hi"}]})
    messages = gw.http.post("/v1/messages", headers=TENANT,
                            json={"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    record = gw.http.get(f"/v1/requests/{request_id}", headers=TENANT)
    assert record.status_code == 200 and "[redacted]" in record.text
    emitted = {
        "error event": result.text, "/v1/complete": complete.text, "chat completions door": chat.text,
        "messages door": messages.text, "record": record.text, "metrics": gw.http.get("/metrics").text,
        "logs": "\n".join(log_lines),
    }
    assert "[redacted]" in emitted["logs"]
    for where, text in emitted.items():
        for key in ALL_KEYS:
            assert key not in text, f"{key} in the {where}"
