"""The OpenAPI document the app serves at `/openapi.json` and `python -m app.openapi` writes to
`openapi/openapi.json` (committed; a test keeps it current). This module builds it from an app it is given;
it never imports the app (`app.main` imports it).

The routes read and validate their bodies themselves (size and depth limits come first), so FastAPI cannot
infer request or response shapes. Each door describes its routes' operations and its own schemas
(`DoorRoute.operation`, `Door.schemas`: `app/doors/*/openapi.py`); this module adds the schemas of the
contract models (`StreamRequest` / `PiStreamRequest`, every SSE event of `text/event-stream` from
`StreamEvent`, the final `AssistantMessage`, the error bodies), the other routes' answers, and bearer auth
on the routes that need a key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from app.api.auth import OPEN_PATHS
from app.api.console import api_router as console_api
from app.api.edge import GatewayApp
from app.contract.events import StreamEvent
from app.contract.messages import AssistantMessage
from app.contract.request import PiStreamRequest, StreamRequest
from app.doors.base import DoorRoute
from app.doors.openapi import RETRY_AFTER, TURN_ERRORS, errors, json_body, ref, stream_ok

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


def _components() -> dict[str, Any]:
    adapters: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        ("StreamRequest", "validation", TypeAdapter(StreamRequest)),
        ("PiStreamRequest", "validation", TypeAdapter(PiStreamRequest)),
        ("StreamEvent", "serialization", TypeAdapter(StreamEvent)),
        ("AssistantMessage", "serialization", TypeAdapter(AssistantMessage)),
        ("ErrorBody", "serialization", TypeAdapter(ErrorBody)),
        ("PiErrorBody", "serialization", TypeAdapter(PiErrorBody)),
        ("CompleteError", "serialization", TypeAdapter(CompleteError)),
        ("Status", "serialization", TypeAdapter(Status)),
    ]
    keyed, defs = TypeAdapter.json_schemas(adapters, ref_template=REF, by_alias=True)
    schemas = dict(defs.get("$defs", {}))
    for (name, _mode), schema in keyed.items():
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


def build_openapi(app: GatewayApp) -> dict[str, Any]:
    """The complete OpenAPI document for `app` (FastAPI's routes plus the shapes the routes parse by hand; the
    doors' from the doors the app serves, `app.doors`)."""
    doors = app.doors
    mounted = {getattr(route, "path", None) for route in app.routes}
    console_routes = [route for route in console_api.routes if getattr(route, "path", None) not in mounted]
    spec = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        description=app.description,
        routes=[*app.routes, *console_routes],  # the console's API is described also when the console is off
    )
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {}).update(_components())
    for door in doors.doors:
        components["schemas"].update(door.schemas)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    door_routes: dict[tuple[str, str], DoorRoute] = {
        (path.replace(":path}", "}"), route.method.lower()): route  # as FastAPI writes a path parameter
        for route in [*(route for _, route in doors.turn_routes()), *(count.route for count in doors.count_routes())]
        for path in route.paths()
    }
    stored_routes = {door.stored.path: door.stored for door in doors.doors if door.stored is not None}
    items_routes = {door.stored.items_path: door.stored for door in doors.doors if door.stored is not None}
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            door_route = door_routes.get((path, method))
            if door_route is not None:  # a door describes its own operations (`app/doors/*/openapi.py`)
                operation.update(door_route.operation())
            elif path in stored_routes:  # a door's stored responses (`StoredResponses`)
                operation.update(stored_routes[path].operation(method))
            elif path in items_routes:  # the query parameters join the path's own
                described = items_routes[path].items_operation()
                operation.update(
                    described, parameters=[*operation.get("parameters", []), *described.get("parameters", [])]
                )
            elif path in ("/healthz", "/readyz"):
                operation["responses"] = {"200": json_body(ref("Status"), "Alive / ready")}
                if path == "/readyz":
                    operation["responses"]["503"] = json_body(ref("Status"), "Draining or store unreachable")
            elif path == "/metrics":
                operation["responses"] = {
                    "200": {
                        "description": "Prometheus text exposition",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                }
            elif path == "/v1/stream/{request_id}" and method == "get":
                operation["responses"] = {
                    "200": stream_ok(),
                    "204": {"description": "`Last-Event-ID` is the terminal event: nothing follows"},
                    **errors(["400", "401"]),
                    "404": json_body(ref("ErrorBody"), "No resumable stream with this id for this key"),
                    "410": json_body(
                        ref("ErrorBody"), "The events after `Last-Event-ID` are no longer kept (`resume_unavailable`)"
                    ),
                    "503": {**json_body(ref("ErrorBody"), "The event store did not answer"), "headers": RETRY_AFTER},
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
            elif path.startswith("/v1/admin/"):  # app/api/admin.py
                responses = operation.setdefault("responses", {})
                responses.update(errors(["400", "401"] if method in ("post", "patch") else ["401"]))
                responses["404"] = json_body(
                    ref("ErrorBody"), "The admin API is off (`GATEWAY_ADMIN_KEYS` is empty), or no such key or team"
                )
                if method in ("post", "patch", "delete"):
                    responses["409"] = json_body(
                        ref("ErrorBody"), "The name is taken, the key is an env or file key, or the team has keys"
                    )
            elif path.startswith("/v1/"):
                responses = operation.setdefault("responses", {})
                responses.update(errors(["401"]))
                if path.startswith(("/v1/spend", "/v1/sessions")):  # app/api/spend.py: `from`/`to` unreadable
                    responses.update(errors(["400"]))
                if path.startswith(("/v1/requests", "/v1/spend", "/v1/sessions")):
                    responses.update(errors(["503"]))
                    responses["503"]["description"] = "The request ledger is unavailable (see `Retry-After`)"
                if "{" in path:
                    responses["404"] = json_body(ref("ErrorBody"), "No such record for this key")
                if path.startswith("/v1/console/"):
                    responses["404"] = json_body(ref("ErrorBody"), "The console is off (`GATEWAY_CONSOLE`)")
            declared_422 = operation.get("responses", {}).get("422", {}).get("content", {}).get("application/json", {})
            if declared_422.get("schema") == ref("HTTPValidationError"):  # FastAPI's; ours answers ErrorBody
                operation["responses"]["422"] = json_body(ref("ErrorBody"), TURN_ERRORS["422"])
            if path not in OPEN_PATHS:
                operation["security"] = [{"bearer": []}]
    schemas = components["schemas"]
    for unused in ("HTTPValidationError", "ValidationError"):
        if f'"#/components/schemas/{unused}"' not in json.dumps(spec["paths"]):
            schemas.pop(unused, None)
    return spec


def render(app: GatewayApp) -> str:
    return json.dumps(build_openapi(app), indent=2, sort_keys=False, ensure_ascii=False) + "\n"
