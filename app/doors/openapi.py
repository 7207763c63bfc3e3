"""What every door's OpenAPI description shares: one POST operation that answers a stream or one JSON object,
and errors in the door's own shape (`app.api.openapi` merges each door's `Door.schemas` and its routes'
`DoorRoute.operation()`)."""

from __future__ import annotations

from typing import Any

_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


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
        body: dict[str, Any] = {"description": errors[code], "content": {"application/json": {"schema": ref(error_schema)}}}
        if code in ("429", "503"):
            body["headers"] = _RETRY_AFTER
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
