"""What every door's OpenAPI description shares: one POST operation that answers a stream or one JSON object,
and errors in the door's own shape (`door_operation`; `app.api.openapi` merges each door's `Door.schemas` and
its routes' `DoorRoute.operation()`); and the pieces the gateway's own routes describe themselves with (the
unified SSE answer `stream_ok`, the error statuses of a turn `TURN_ERRORS` in the `errors` they answer with),
which the unified door, pi's door and `app.api.openapi` use."""

from __future__ import annotations

from typing import Any

_DOOR_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "string"}}}
TURN_ERRORS = {
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
TURN_CODES = ["400", "401", "403", "404", "413", "415", "422", "429", "503"]
_EVENT_DOC = (
    "Server-sent events. Each frame is `id: <n>`, `event: <type>`, `data: <one JSON object whose type equals "
    "event>`; `: ping` comment lines are keep-alives. The stream ends after exactly one terminal event, "
    "`done` or `error`. The schema below is that of one frame's `data`."
)


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def errors(codes: list[str], schema: str = "ErrorBody") -> dict[str, Any]:
    """Each status of `codes` with its `TURN_ERRORS` description and the `schema` body (429 and 503 with
    `Retry-After`)."""
    out = {}
    for code in codes:
        response = json_body(ref(schema), TURN_ERRORS[code])
        if code in ("429", "503"):
            response["headers"] = RETRY_AFTER
        out[code] = response
    return out


def stream_ok() -> dict[str, Any]:
    """The unified SSE answer (`/v1/stream`, `/api/stream`, a resumed stream)."""
    return {
        "description": _EVENT_DOC,
        "headers": {"X-Request-Id": {"schema": {"type": "string"}}},
        "content": {"text/event-stream": {"schema": ref("StreamEvent")}},
    }


def request_body(schema: str, example: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": ref(schema), "example": example}}}


def door_operation(
    *,
    request_schema: str,
    example: dict[str, Any],
    ok_description: str,
    ok_schema: str,
    error_schema: str,
    errors: dict[str, str],
) -> dict[str, Any]:
    """The operation: `request_schema` in, `text/event-stream` or `ok_schema` out, and each status of
    `errors` (status → description) with the `error_schema` body (429 and 503 with `Retry-After`)."""

    def error(code: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "description": errors[code],
            "content": {"application/json": {"schema": ref(error_schema)}},
        }
        if code in ("429", "503"):
            body["headers"] = _DOOR_RETRY_AFTER
        return body

    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref(request_schema), "example": example}},
        },
        "responses": {
            "200": {
                "description": ok_description,
                "content": {
                    "text/event-stream": {"schema": {"type": "string"}},
                    "application/json": {"schema": ref(ok_schema)},
                },
            },
            **{code: error(code) for code in errors},
        },
    }
