"""The committed OpenAPI document matches the app, and a bounded schemathesis run finds no 5xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import content_type_conformance, not_a_server_error, status_code_conformance

from app.contract.events import StreamEvent
from app.main import create_app
from app.api.openapi import SPEC_PATH, build_openapi, render
from app.settings import Settings

schema = schemathesis.openapi.from_path(SPEC_PATH)


def test_committed_spec_is_current():
    generated = render(create_app(Settings()))
    assert SPEC_PATH.read_text() == generated, "openapi/openapi.json is stale: run `python -m app.openapi`"


def test_the_document_builder_does_not_import_the_app():
    """No cycle between the app object and the OpenAPI writer: `app.main` imports the builder, and only the
    command (`python -m app.openapi`) imports both."""
    probe = "import sys, app.api.openapi; print(sorted({'app.main', 'app.openapi'} & set(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert loaded.strip() == "[]"


def test_served_spec_is_the_built_one(gateway):
    assert gateway.http.get("/openapi.json").json() == build_openapi(gateway.server.app)


def test_spec_documents_bodies_events_and_errors():
    spec = build_openapi(create_app(Settings()))
    paths, schemas = spec["paths"], spec["components"]["schemas"]
    stream = paths["/v1/stream"]["post"]
    assert stream["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/StreamRequest"
    }
    assert stream["responses"]["200"]["content"]["text/event-stream"]["schema"] == {
        "$ref": "#/components/schemas/StreamEvent"
    }
    assert stream["responses"]["429"]["headers"]["Retry-After"]
    pi = paths["/api/stream"]["post"]
    assert pi["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/PiStreamRequest")
    assert pi["responses"]["413"]["content"]["application/json"]["schema"]["$ref"].endswith("/PiErrorBody")
    # Every event type of the contract is one of the documented SSE shapes.
    documented = {ref["$ref"].rsplit("/", 1)[1] for ref in schemas["StreamEvent"]["oneOf"]}
    assert documented == {member.__name__ for member in StreamEvent.__origin__.__args__}
    for name in documented:
        assert schemas[name]["properties"]["type"]["const"]
    assert set(schemas["ErrorBody"]["properties"]) == {"error"}
    assert {"/v1/stream", "/v1/complete", "/api/stream", "/v1/models", "/healthz", "/readyz", "/metrics"} <= set(paths)
    assert "security" not in paths["/metrics"]["get"] and paths["/v1/stream"]["post"]["security"]


@pytest.fixture(scope="module")
def fuzz_target(gateway_factory):
    """A gateway with short timeouts, so a generated request can never hang the run."""
    return gateway_factory(first_event_timeout=3, idle_timeout=3, total_timeout=10, retries=0)


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_fuzz(case, fuzz_target):
    response = case.call(base_url=fuzz_target.url, timeout=30)
    case.validate_response(response, checks=[not_a_server_error, status_code_conformance, content_type_conformance])


def test_pi_door_errors_are_documented_as_strings_for_every_status():
    pi = build_openapi(create_app(Settings()))["paths"]["/api/stream"]["post"]["responses"]
    errors = {code: r["content"]["application/json"]["schema"]["$ref"] for code, r in pi.items() if code != "200"}
    assert errors and all(ref.endswith("/PiErrorBody") for ref in errors.values()), errors


def test_spec_documents_the_token_count_route():
    """`POST /v1/messages/count_tokens`: Anthropic's count request in, `{"input_tokens"}` out, Anthropic's errors."""
    spec = build_openapi(create_app(Settings()))
    count = spec["paths"]["/v1/messages/count_tokens"]["post"]
    assert count["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/MessagesCountTokensRequest")
    ok = count["responses"]["200"]["content"]
    assert set(ok) == {"application/json"} and ok["application/json"]["schema"]["$ref"].endswith("/MessageTokensCount")
    assert spec["components"]["schemas"]["MessageTokensCount"]["required"] == ["input_tokens"]
    assert count["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/AnthropicErrorBody")
    assert count["security"]
