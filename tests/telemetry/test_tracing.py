"""OpenTelemetry traces (app/tracing): a real `python -m app` configured only by the OTEL_* variables, exporting
OTLP/HTTP to a receiver this test starts (tests/otlp_receiver.py), with the simulator as the vendor.

Each door's done, error and aborted turns are checked: the SERVER span is the child of the client's
`traceparent`, the attempt's CLIENT span carries the GenAI attributes and is what the upstream request's
`traceparent` names, and no key or message text is exported unless content capture is asked for.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.api.edge import GatewayApp
from app.contract.messages import DOOR_VALIDATION, Context
from app.telemetry.tracing import tracing_configured
from app.telemetry.tracing.content import input_attributes
from app.telemetry.tracing.setup import exporter_names
from tests.conftest import PROVIDER_KEYS, marker
from tests.otlp_receiver import OtlpReceiver
from tests.procs import GatewayProcess, free_port

CLIENT_KEY = "sk-gw-CLIENTKEY-tracing-0123456789"
KEY_NAME = "team-a"
DONE = "anthropic/text"
ERROR = "anthropic/text;fault=http;at=before_headers;status=503"  # retried once, then the turn fails
SLOW = "anthropic/slow;n=3000;delay_ms=10"  # 30 s of paced text: the client leaves long before its end


def _env(endpoint: str, **extra: str) -> dict[str, str]:
    return {
        "GATEWAY_API_KEYS": f"{KEY_NAME}:{CLIENT_KEY}",
        "GATEWAY_RETRIES": "1",
        "GATEWAY_RETRY_BACKOFF_MS": "5",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
        **extra,
    }


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def traced(sim: Any, receiver: OtlpReceiver) -> Iterator[GatewayProcess]:
    every_vendor = {  # besides Anthropic (tests/procs.py): each adapter's SDK and transport
        "OPENAI_API_KEY": PROVIDER_KEYS["openai"],
        "GATEWAY_OPENAI_BASE_URL": f"{sim.url}/openai/v1",
        "GEMINI_API_KEY": PROVIDER_KEYS["google"],
        "GATEWAY_GOOGLE_BASE_URL": f"{sim.url}/google",
        "GATEWAY_COMPAT_BASE_URL": f"{sim.url}/compat/v1",
    }
    proc = GatewayProcess(sim.url, **_env(receiver.url), **every_vendor)
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


class Door:
    """How to ask one door for a streamed turn, and how its stream shows content."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path

    def body(self, model: str, prompt: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt}]
        if self.name == "unified":
            return {
                "model": model,
                "context": {"messages": messages},
                "options": {"maxTokens": 100, "temperature": 0.5},
            }
        if self.name == "pi":
            provider, model_id = model.split("/", 1)
            return {
                "model": {"provider": provider, "id": model_id},
                "context": {"messages": messages},
                "options": {"maxTokens": 100, "temperature": 0.5},
            }
        return {"model": model, "messages": messages, "stream": True, "max_tokens": 100, "temperature": 0.5}


DOORS = [
    Door("unified", "/v1/stream"),
    Door("pi", "/api/stream"),
    Door("openai-chat", "/v1/chat/completions"),
    Door("anthropic-messages", "/v1/messages"),
]


def _traceparent() -> tuple[str, str, str]:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent}-01", trace_id, parent


def _headers(traceparent: str) -> dict[str, str]:
    return {"authorization": f"Bearer {CLIENT_KEY}", "traceparent": traceparent, "tracestate": "vendor=caller"}


def _turn(proc: GatewayProcess, door: Door, model: str, prompt: str, traceparent: str) -> httpx.Response:
    response = httpx.post(
        f"{proc.url}{door.path}", json=door.body(model, prompt), headers=_headers(traceparent), timeout=60
    )
    return response


def _aborted_turn(proc: GatewayProcess, door: Door, prompt: str, traceparent: str) -> str:
    """Stream a long turn, leave after its first content; the request id."""
    with httpx.stream(
        "POST", f"{proc.url}{door.path}", json=door.body(SLOW, prompt), headers=_headers(traceparent), timeout=60
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if "delta" in line:  # a content event, in every door's format
                break
        return r.headers["x-request-id"]


def _server(spans: list[dict[str, Any]]) -> dict[str, Any]:
    (server,) = [s for s in spans if s["kind"] == "server"]
    return server


def _clients(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((s for s in spans if s["kind"] == "client"), key=lambda s: s["attributes"]["gateway.attempt"])


def _trace(receiver: OtlpReceiver, trace_id: str, clients: int) -> list[dict[str, Any]]:
    def complete(spans: list[dict[str, Any]]) -> bool:
        mine = [s for s in spans if s["trace_id"] == trace_id]
        return any(s["kind"] == "server" for s in mine) and sum(s["kind"] == "client" for s in mine) >= clients

    return [s for s in receiver.wait(complete) if s["trace_id"] == trace_id]


def _check_server(server: dict[str, Any], door: Door, parent: str, request_id: str) -> dict[str, Any]:
    attributes = server["attributes"]
    assert server["parent_span_id"] == parent
    assert server["name"] == f"POST {door.path}"
    assert attributes["http.request.method"] == "POST" and attributes["http.route"] == door.path
    assert attributes["gateway.request.id"] == request_id
    assert attributes["gateway.door"] == door.name
    assert attributes["gateway.api_key.name"] == KEY_NAME
    assert server["resource"]["service.name"] == "llm-gateway"
    assert server["resource"]["deployment.environment.name"] == "test"
    return attributes


def _check_client(client: dict[str, Any], server: dict[str, Any], sim_port: int, model: str = DONE) -> dict[str, Any]:
    attributes = client["attributes"]
    model_id = model.split("/", 1)[1]
    assert client["name"] == f"chat {model_id}" and client["parent_span_id"] == server["span_id"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == model_id
    assert attributes["gen_ai.request.max_tokens"] == 100 and attributes["gen_ai.request.temperature"] == 0.5
    assert attributes["server.address"] == "127.0.0.1" and attributes["server.port"] == sim_port
    return attributes


def _upstream_traceparents(sim: Any, prompt: str) -> list[str]:
    return [entry["traceparent"] for entry in sim.seen(prompt)]


@pytest.mark.parametrize("door", DOORS, ids=lambda d: d.name)
def test_a_done_turn_is_a_server_span_under_the_callers_trace_with_a_genai_client_span(traced, receiver, sim, door):
    traceparent, trace_id, parent = _traceparent()
    prompt = marker()
    response = _turn(traced, door, DONE, prompt, traceparent)
    assert response.status_code == 200
    spans = _trace(receiver, trace_id, clients=1)
    server = _server(spans)
    attributes = _check_server(server, door, parent, response.headers["x-request-id"])
    assert attributes["http.response.status_code"] == 200 and attributes["gateway.turn.outcome"] == "done"
    assert server["status"] == "unset" and "error.type" not in attributes
    (client,) = _clients(spans)
    client_attributes = _check_client(client, server, int(sim.url.rsplit(":", 1)[1]))
    assert client_attributes["gen_ai.response.model"]
    assert client_attributes["gen_ai.response.id"]
    assert client_attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert client_attributes["gen_ai.usage.input_tokens"] > 0 and client_attributes["gen_ai.usage.output_tokens"] > 0
    assert client_attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert "gen_ai.first_chunk" in [event["name"] for event in client["events"]]
    assert "error.type" not in client_attributes and client["status"] == "unset"
    # The upstream request carried the attempt's span as its parent, in the caller's trace.
    assert _upstream_traceparents(sim, prompt) == [f"00-{trace_id}-{client['span_id']}-01"]


@pytest.mark.parametrize("door", DOORS, ids=lambda d: d.name)
def test_an_error_turn_has_a_client_span_per_attempt_saying_why_it_retried(traced, receiver, sim, door):
    traceparent, trace_id, parent = _traceparent()
    prompt = marker()
    response = _turn(traced, door, ERROR, prompt, traceparent)
    spans = _trace(receiver, trace_id, clients=2)
    server = _server(spans)
    attributes = _check_server(server, door, parent, response.headers["x-request-id"])
    assert attributes["http.response.status_code"] == response.status_code
    assert attributes["gateway.turn.outcome"] == "error" and attributes["gateway.attempts"] == 2
    assert server["status"] == "error" and attributes["error.type"] == "overloaded"
    first, retry = _clients(spans)
    for client in (first, retry):
        client_attributes = _check_client(client, server, int(sim.url.rsplit(":", 1)[1]), ERROR)
        assert client_attributes["error.type"] == "503" and client_attributes["http.response.status_code"] == 503
        assert client["status"] == "error"
    assert "gateway.attempt.reason" not in first["attributes"]
    assert retry["attributes"]["gateway.attempt.reason"] == "retry"
    assert retry["attributes"]["gateway.attempt.after_error.type"] == "503"
    traceparents = _upstream_traceparents(sim, prompt)
    assert traceparents == [f"00-{trace_id}-{c['span_id']}-01" for c in (first, retry)]


@pytest.mark.parametrize("door", DOORS, ids=lambda d: d.name)
def test_an_aborted_turn_ends_its_spans_saying_the_client_left(traced, receiver, sim, door):
    traceparent, trace_id, parent = _traceparent()
    prompt = marker()
    request_id = _aborted_turn(traced, door, prompt, traceparent)
    spans = _trace(receiver, trace_id, clients=1)
    server = _server(spans)
    attributes = _check_server(server, door, parent, request_id)
    assert attributes["gateway.turn.outcome"] == "aborted"
    assert server["status"] == "error" and attributes["error.type"] == "client_disconnected"
    (client,) = _clients(spans)
    _check_client(client, server, int(sim.url.rsplit(":", 1)[1]), SLOW)
    assert client["attributes"]["error.type"] == "client_disconnected" and client["status"] == "error"
    assert "gen_ai.response.finish_reasons" not in client["attributes"]
    assert client["end_ns"] <= server["end_ns"]
    assert _upstream_traceparents(sim, prompt) == [f"00-{trace_id}-{client['span_id']}-01"]


@pytest.mark.parametrize(
    "model, provider_name",
    [("openai/text", "openai"), ("google/text", "gcp.gemini"), ("compat/text", "compat")],
)
def test_every_adapter_sends_its_attempts_traceparent_and_names_the_vendors_response(
    traced, receiver, sim, model, provider_name
):
    traceparent, trace_id, _ = _traceparent()
    prompt = marker()
    assert _turn(traced, DOORS[0], model, prompt, traceparent).status_code == 200
    (client,) = _clients(_trace(receiver, trace_id, clients=1))
    attributes = client["attributes"]
    assert client["name"] == "chat text" and attributes["gen_ai.provider.name"] == provider_name
    assert attributes["gen_ai.response.id"] and attributes["gen_ai.response.model"]
    assert attributes["gen_ai.usage.output_tokens"] > 0 and attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert _upstream_traceparents(sim, prompt) == [f"00-{trace_id}-{client['span_id']}-01"]


def test_an_ordinary_fastapi_route_gets_its_server_span_too(traced, receiver):
    traceparent, trace_id, parent = _traceparent()
    response = httpx.get(f"{traced.url}/v1/models", headers=_headers(traceparent), timeout=30)
    assert response.status_code == 200
    (server,) = receiver.trace(trace_id, 1)
    assert server["kind"] == "server" and server["parent_span_id"] == parent
    assert server["name"] == "GET /v1/models" and server["attributes"]["http.route"] == "/v1/models"
    assert server["attributes"]["http.response.status_code"] == 200
    assert server["attributes"]["gateway.request.id"] == response.headers["x-request-id"]


def test_a_request_without_traceparent_starts_a_trace_of_its_own(traced, receiver, sim):
    prompt = marker()
    response = httpx.post(
        f"{traced.url}/v1/stream",
        json=DOORS[0].body(DONE, prompt),
        headers={"authorization": f"Bearer {CLIENT_KEY}"},
        timeout=30,
    )
    (traceparent,) = _upstream_traceparents(sim, prompt)
    trace_id = traceparent.split("-")[1]
    server = _server(_trace(receiver, trace_id, clients=1))
    assert server["parent_span_id"] is None
    assert server["attributes"]["gateway.request.id"] == response.headers["x-request-id"]


def test_no_key_and_no_message_text_in_any_exported_attribute(traced, receiver, sim):
    traceparent, trace_id, _ = _traceparent()
    prompt = f"secret prompt {marker()}"
    response = _turn(traced, DOORS[0], DONE, prompt, traceparent)
    reply = "".join(
        json.loads(line[5:]).get("delta", "") for line in response.text.splitlines() if line.startswith("data:")
    )
    assert reply.strip()
    _trace(receiver, trace_id, clients=1)
    exported = json.dumps([[s["attributes"], s["events"], s["resource"], s["status_message"]] for s in receiver.spans])
    for secret in (CLIENT_KEY, *PROVIDER_KEYS.values(), prompt, reply.strip()):
        assert secret not in exported
    assert not any(
        name.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system"))
        for s in receiver.spans
        for name in s["attributes"]
    )


def test_a_key_in_the_url_reaches_no_span(traced, receiver):
    """Issue 39 item 4: a Gemini client's `?key=`, right or wrong, is in no exported attribute (the SERVER
    span records `url.path`, never the query)."""
    wrong = "sk-wrong-in-query-0123456789"
    for key, status in ((CLIENT_KEY, 200), (wrong, 401)):
        traceparent, trace_id, _ = _traceparent()
        response = httpx.post(
            f"{traced.url}/v1beta/models/anthropic/text:generateContent",
            params={"key": key},
            json={"contents": [{"parts": [{"text": marker()}]}]},
            headers={"traceparent": traceparent},
            timeout=30,
        )
        assert response.status_code == status
        spans = receiver.wait(lambda spans: any(s["trace_id"] == trace_id and s["kind"] == "server" for s in spans))
        server = next(s for s in spans if s["trace_id"] == trace_id and s["kind"] == "server")
        assert server["attributes"]["url.path"] == "/v1beta/models/anthropic/text:generateContent"
    exported = json.dumps([[s["name"], s["attributes"], s["events"], s["status_message"]] for s in receiver.spans])
    assert CLIENT_KEY not in exported and wrong not in exported


def test_a_receiver_that_does_not_answer_never_holds_a_turn_up(traced, receiver):
    """Exports wait on a receiver that holds them; a turn meanwhile completes as usual."""
    receiver.hold()
    try:
        exports = receiver.exports
        traceparent, trace_id, _ = _traceparent()
        assert _turn(traced, DOORS[0], DONE, marker(), traceparent).status_code == 200
        receiver.wait_exports(exports + 1)  # the exporter is now stuck in a request the receiver holds
        traceparent, later_trace, _ = _traceparent()
        response = _turn(traced, DOORS[0], DONE, marker(), traceparent)
        assert response.status_code == 200 and '"type":"done"' in response.text.replace(" ", "")
    finally:
        receiver.release()
    _trace(receiver, later_trace, clients=1)


def test_a_receiver_that_is_down_never_fails_a_turn(sim):
    proc = GatewayProcess(sim.url, **_env(f"http://127.0.0.1:{free_port()}"))
    try:
        proc.wait_ready()
        traceparent, _, _ = _traceparent()
        for door in DOORS:
            response = _turn(proc, door, DONE, marker(), traceparent)
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    finally:
        proc.stop()


TENANT_BAGGAGE = "tenant.id=acme-corp,user.email=alice%40acme.example"


def _upstream_baggage(proc: GatewayProcess, sim: Any) -> tuple[str | None, str | None]:
    """A turn whose client sends a `baggage` header; what the vendor received: its baggage and traceparent."""
    traceparent, _, _ = _traceparent()
    prompt = marker()
    response = httpx.post(
        f"{proc.url}/v1/stream",
        json=DOORS[0].body(DONE, prompt),
        headers={**_headers(traceparent), "baggage": TENANT_BAGGAGE},
        timeout=30,
    )
    assert response.status_code == 200
    [entry] = sim.seen(prompt)
    return entry["headers"].get("baggage"), entry["traceparent"]


def test_a_clients_baggage_never_reaches_a_vendor_by_default_but_the_trace_context_does(traced, sim):
    """Issue 39 item 9: the default propagators forwarded the tenant's `baggage` to the vendor."""
    forwarded, traceparent = _upstream_baggage(traced, sim)
    assert forwarded is None and traceparent is not None


def test_a_clients_baggage_reaches_the_vendor_when_the_operator_opts_in(sim, receiver):
    proc = GatewayProcess(sim.url, **_env(receiver.url, GATEWAY_FORWARD_BAGGAGE="true"))
    try:
        proc.wait_ready()
        forwarded, traceparent = _upstream_baggage(proc, sim)
    finally:
        proc.stop()
    assert forwarded is not None and traceparent is not None
    assert {item.strip() for item in forwarded.split(",")} == set(TENANT_BAGGAGE.split(","))


def test_message_content_is_exported_in_the_conventions_shape_only_when_asked(sim):
    receiver = OtlpReceiver()
    proc = GatewayProcess(sim.url, **_env(receiver.url, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"))
    try:
        proc.wait_ready()
        traceparent, trace_id, _ = _traceparent()
        prompt = marker()
        body = {
            "model": DONE,
            "context": {"systemPrompt": "be brief", "messages": [{"role": "user", "content": prompt}]},
        }
        assert (
            httpx.post(f"{proc.url}/v1/stream", json=body, headers=_headers(traceparent), timeout=30).status_code == 200
        )
        (client,) = _clients(_trace(receiver, trace_id, clients=1))
    finally:
        proc.stop()
        receiver.stop()
    attributes = client["attributes"]
    assert json.loads(attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": prompt}]}
    ]
    assert json.loads(attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "be brief"}]
    (output,) = json.loads(attributes["gen_ai.output.messages"])
    assert output["role"] == "assistant" and output["finish_reason"] == "stop"
    assert output["parts"] and all(part["type"] == "text" and part["content"] for part in output["parts"])


def test_a_system_message_inside_the_conversation_is_exported_with_the_system_role():
    context = Context.model_validate(
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": [{"type": "text", "text": "answer in French"}]},
                {"role": "user", "content": "and now?"},
            ]
        },
        context=DOOR_VALIDATION,
    )
    assert json.loads(input_attributes(context)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "system", "parts": [{"type": "text", "content": "answer in French"}]},
        {"role": "user", "parts": [{"type": "text", "content": "and now?"}]},
    ]


def test_tracing_is_off_unless_configured_and_then_costs_no_wrapper_or_observer(gateway):
    assert not tracing_configured({})
    assert not tracing_configured({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_EXPORTER": "none"})
    assert not tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})
    assert tracing_configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert tracing_configured({"OTEL_TRACES_EXPORTER": "console"})
    # The test gateway runs without OTEL_* variables: the plain app, no tracing observer, no trace context upstream.
    assert type(gateway.server.app) is GatewayApp
    assert not any(type(o).__name__ == "TurnTracer" for o in gateway.state.dispatcher.observers)
    prompt = marker()
    gateway.stream({"model": DONE, "context": {"messages": [{"role": "user", "content": prompt}]}})
    assert _upstream_traceparents(gateway.sim, prompt) == [None]


@pytest.mark.parametrize(
    "environ, names",
    [
        ({}, ["otlp_proto_http"]),  # the specification's default (the Python SDK alone would pick gRPC)
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ["otlp_proto_grpc"]),
        (
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
            ["otlp_proto_http"],
        ),
        ({"OTEL_TRACES_EXPORTER": "console,otlp"}, ["console", "otlp_proto_http"]),
    ],
)
def test_the_otlp_protocol_variables_pick_the_sdks_exporter(monkeypatch, environ, names):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert exporter_names() == names


def test_probes_metrics_and_the_demo_simulator_routes_are_left_out_of_traces(traced, receiver):
    probes, probes_trace, _ = _traceparent()
    for path in ("/healthz", "/readyz", "/metrics", "/_simulator/_sim/requests"):
        httpx.get(f"{traced.url}{path}", headers=_headers(probes), timeout=30)
    after, after_trace, _ = _traceparent()
    assert httpx.get(f"{traced.url}/v1/models", headers=_headers(after), timeout=30).status_code == 200
    receiver.trace(after_trace, 1)  # exported after anything the probes would have produced
    assert [s["name"] for s in receiver.spans if s["trace_id"] == probes_trace] == []
