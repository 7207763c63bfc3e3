"""The OpenAPI document the app serves at `/openapi.json` and `python -m app.openapi` writes to
`openapi/openapi.json` (committed; a test keeps it current). This module builds it from an app it is given;
it never imports the app (`app.main` imports it).

The routes read and validate their bodies themselves (size and depth limits come first), so FastAPI cannot
infer request or response shapes. This module adds them from the contract models: request bodies from
`StreamRequest` / `PiStreamRequest`, every SSE event of `text/event-stream` from `StreamEvent`, the final
`AssistantMessage`, and the error bodies, plus bearer auth on the routes that need a key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field, TypeAdapter

from app.api.auth import OPEN_PATHS
from app.contract.events import StreamEvent
from app.contract.messages import AssistantMessage
from app.contract.request import PiStreamRequest, StreamRequest
from app.doors.anthropic_messages import openapi as anthropic_messages_openapi
from app.doors.openai_chat import openapi as openai_chat_openapi
from app.doors.openai_responses import openapi as openai_responses_openapi

# Doors that speak a vendor's wire format describe their own operation and schemas (`app/doors/*/openapi.py`).
DOOR_DOCS = {
    openai_chat_openapi.PATH: openai_chat_openapi,
    openai_responses_openapi.PATH: openai_responses_openapi,
    anthropic_messages_openapi.PATH: anthropic_messages_openapi,
    anthropic_messages_openapi.COUNT_PATH: anthropic_messages_openapi.COUNT,
}

SPEC_PATH = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
REF = "#/components/schemas/{model}"


class ErrorDetail(BaseModel):
    type: str = Field(description="machine-readable kind, e.g. validation_error, payload_too_large, too_many_streams")
    message: str
    param: str | None = Field(description="the offending request field, when there is one")


class ErrorBody(BaseModel):
    """Every error found before streaming starts (`/v1/*`)."""

    error: ErrorDetail


class PiErrorBody(BaseModel):
    """Errors before streaming on the pi-compatible door (`/api/stream`): the message as a string."""

    error: str


class CompleteError(BaseModel):
    """`/v1/complete` when the turn ends in `error`: the error and the partial message."""

    error: ErrorDetail
    message: AssistantMessage
    request_id: str = Field(alias="requestId")


class Status(BaseModel):
    status: str = Field(description="ok | ready | draining | store unavailable")


_ERRORS = {
    "400": "Body is not a JSON object",
    "401": "Missing or invalid API key",
    "403": "The key's policy does not allow this model (`model_not_allowed`, keys file), or the key has a budget "
    "and the catalog has no price for it (`model_not_priced`)",
    "404": "Unknown provider or model",
    "413": "Body too large or nested too deep",
    "415": "The body is not declared as JSON (`Content-Type: application/json`)",
    "422": "Body violates the request schema (the field is named in `param`)",
    "429": "Too many concurrent streams, or a key limit reached: `error.type` is `too_many_streams`, "
    "`rate_limit_rpm`, `rate_limit_tpm`, `concurrency_limit` or `budget_exceeded` (see `Retry-After`)",
    "503": "Gateway shutting down, or the limit store unavailable with GATEWAY_REDIS_FAIL_OPEN=false "
    "(see `Retry-After`)",
}
_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "string"}}}
_EVENT_DOC = (
    "Server-sent events. Each frame is `id: <n>`, `event: <type>`, `data: <one JSON object whose type equals "
    "event>`; `: ping` comment lines are keep-alives. The stream ends after exactly one terminal event, "
    "`done` or `error`. The schema below is that of one frame's `data`."
)


_EXAMPLE = {
    "model": "anthropic/claude-sonnet-4-5",
    "fallback": ["openai/gpt-5-mini"],
    "context": {"systemPrompt": "You are terse.", "messages": [{"role": "user", "content": "Hello"}]},
    "options": {"maxTokens": 256, "throttleMs": 50},
}
_PI_EXAMPLE = {
    "model": {"provider": "anthropic", "id": "claude-sonnet-4-5"},
    "context": {"messages": [{"role": "user", "content": "Hello"}]},
    "options": {"maxTokens": 256},
}


def _components() -> dict[str, Any]:
    adapters = [
        ("StreamRequest", "validation", TypeAdapter(StreamRequest)),
        ("PiStreamRequest", "validation", TypeAdapter(PiStreamRequest)),
        ("StreamEvent", "serialization", TypeAdapter(StreamEvent)),
        ("AssistantMessage", "serialization", TypeAdapter(AssistantMessage)),
        ("ErrorBody", "serialization", TypeAdapter(ErrorBody)),
        ("PiErrorBody", "serialization", TypeAdapter(PiErrorBody)),
        ("CompleteError", "serialization", TypeAdapter(CompleteError)),
        ("Status", "serialization", TypeAdapter(Status)),
    ]
    keyed, defs = TypeAdapter.json_schemas(
        [(name, mode, adapter) for name, mode, adapter in adapters], ref_template=REF, by_alias=True
    )
    schemas = dict(defs.get("$defs", {}))
    for (name, mode), schema in keyed.items():
        if "$ref" not in schema or len(schema) > 1:
            schemas[name] = schema
        else:  # a model: its schema is already in $defs under its own name
            target = schema["$ref"].rsplit("/", 1)[1]
            if target != name:
                schemas[name] = schema
    _require_discriminators(schemas)
    roots = {name for name, _ in keyed} | {s["$ref"].rsplit("/", 1)[1] for s in keyed.values() if "$ref" in s}
    reachable = _reachable(schemas, roots)
    return {k: schemas[k] for k in sorted(schemas) if k in reachable}


def _reachable(schemas: dict[str, Any], roots: set[str]) -> set[str]:
    """The schemas `roots` name, directly or through `$ref`s. pydantic also emits the definitions of models
    whose every use is hidden from the document (`SkipJsonSchema`: the door-only `SystemMessage`); those go."""
    seen: set[str] = set()
    todo = [r for r in roots if r in schemas]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        stack = [schemas[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.rsplit("/", 1)[1] in schemas:
                    todo.append(ref.rsplit("/", 1)[1])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return seen


def _require_discriminators(schemas: dict[str, Any]) -> None:
    """A union member's tag (`role`, `type`) has a default in the models, but the union needs it sent: mark it
    required so the document says what the validator accepts."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            discriminator = node.get("discriminator")
            if isinstance(discriminator, dict):
                for target in discriminator.get("mapping", {}).values():
                    member = schemas.get(target.rsplit("/", 1)[1])
                    if member is not None:
                        required = member.setdefault("required", [])
                        if discriminator["propertyName"] not in required:
                            required.insert(0, discriminator["propertyName"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schemas)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(codes: list[str], pi: bool = False) -> dict[str, Any]:
    out = {}
    for code in codes:
        response = _json(_ref("PiErrorBody" if pi else "ErrorBody"), _ERRORS[code])
        if code in ("429", "503"):
            response["headers"] = _RETRY_AFTER
        out[code] = response
    return out


def _stream_ok() -> dict[str, Any]:
    return {
        "description": _EVENT_DOC,
        "headers": {"X-Request-Id": {"schema": {"type": "string"}}},
        "content": {"text/event-stream": {"schema": _ref("StreamEvent")}},
    }


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The complete OpenAPI document for `app` (FastAPI's routes plus the shapes the routes parse by hand)."""
    spec = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        description=app.description,
        routes=app.routes,
    )
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {}).update(_components())
    for door in DOOR_DOCS.values():
        components["schemas"].update(door.SCHEMAS)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    turn_codes = ["400", "401", "403", "404", "413", "415", "422", "429", "503"]
    body = {
        "/v1/stream": ("StreamRequest", {"200": _stream_ok(), **_errors(turn_codes)}),
        "/v1/complete": (
            "StreamRequest",
            {
                "200": _json(_ref("AssistantMessage"), "The turn ended in stop, length or toolUse"),
                "502": _json(_ref("CompleteError"), "The turn ended in error (upstream failure, timeout, ...)"),
                **_errors(turn_codes),
            },
        ),
        "/api/stream": ("PiStreamRequest", {"200": _stream_ok(), **_errors(turn_codes, pi=True)}),
    }
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if path in DOOR_DOCS and method == "post":
                operation.update(DOOR_DOCS[path].operation())
            elif path in body and method == "post":
                model, responses = body[path]
                example = _PI_EXAMPLE if model == "PiStreamRequest" else _EXAMPLE
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(model), "example": example}},
                }
                operation["responses"] = responses
            elif path in ("/healthz", "/readyz"):
                operation["responses"] = {"200": _json(_ref("Status"), "Alive / ready")}
                if path == "/readyz":
                    operation["responses"]["503"] = _json(_ref("Status"), "Draining or store unreachable")
            elif path == "/metrics":
                operation["responses"] = {
                    "200": {
                        "description": "Prometheus text exposition",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                }
            elif path == "/v1/stream/{request_id}" and method == "get":
                operation["responses"] = {
                    "200": _stream_ok(),
                    "204": {"description": "`Last-Event-ID` is the terminal event: nothing follows"},
                    **_errors(["400", "401"]),
                    "404": _json(_ref("ErrorBody"), "No resumable stream with this id for this key"),
                    "410": _json(_ref("ErrorBody"), "The events after `Last-Event-ID` are no longer kept (`resume_unavailable`)"),
                    "503": {**_json(_ref("ErrorBody"), "The event store did not answer"), "headers": _RETRY_AFTER},
                }
                operation["parameters"] = [
                    *operation.get("parameters", []),
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": "the id of the last event received; the stream continues with the next",
                        "schema": {"type": "string", "pattern": "^[0-9]+$"},
                    },
                ]
            elif path.startswith("/v1/"):
                responses = operation.setdefault("responses", {})
                responses.update(_errors(["401"]))
                if path.startswith("/v1/requests"):
                    responses.update(_errors(["503"]))
                    responses["503"]["description"] = "The request ledger is unavailable (see `Retry-After`)"
                if "{" in path:
                    responses["404"] = _json(_ref("ErrorBody"), "No such record for this key")
            declared_422 = operation.get("responses", {}).get("422", {}).get("content", {}).get("application/json", {})
            if declared_422.get("schema") == _ref("HTTPValidationError"):  # FastAPI's; ours answers ErrorBody
                operation["responses"]["422"] = _json(_ref("ErrorBody"), _ERRORS["422"])
            if path not in OPEN_PATHS:
                operation["security"] = [{"bearer": []}]
    schemas = components["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        if f'"#/components/schemas/{unused}"' not in json.dumps(spec["paths"]):
            schemas.pop(unused, None)
    return spec


def render(app: FastAPI) -> str:
    return json.dumps(build_openapi(app), indent=2, sort_keys=False, ensure_ascii=False) + "\n"

