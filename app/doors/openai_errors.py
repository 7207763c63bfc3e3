"""OpenAI's error shape, which the Chat Completions and Responses doors both answer in: `{"error": {"message",
"type", "param", "code"}}`, `type` in OpenAI's vocabulary and the gateway's own kind in `code`.

A request refused before its turn starts keeps the gateway's status, its `type` following the status
(`error_body`); a failed turn is typed by what ended it (`error_of`), as the HTTP error before the stream started,
an error line in the stream or a `response.failed`."""

from __future__ import annotations

from typing import Any

from app.contract.failures import Failure
from app.doors.errors import BadRequest

# The `type` OpenAI uses per status; the gateway's own kind goes in `code`.
STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "server_error"}  # fmt: skip

# (type, code) of a failed turn, in OpenAI's vocabulary where it has one.
FAILURE_TYPES: dict[Failure | None, tuple[str, str]] = {
    Failure.INVALID_REQUEST: ("invalid_request_error", "upstream_rejected_request"),
    Failure.RATE_LIMITED: ("rate_limit_error", "rate_limit_exceeded"),
    Failure.OVERLOADED: ("server_error", "upstream_overloaded"),
    Failure.TIMEOUT: ("timeout_error", "timeout"),
    Failure.SHUTTING_DOWN: ("server_error", "gateway_shutting_down"),
    Failure.ABORTED: ("server_error", "client_disconnected"),
    # A refusal or safety stop (a blocked prompt included): 400, as OpenAI answers a prompt its filter blocks.
    Failure.REFUSED: ("invalid_request_error", "refusal"),
    Failure.UPSTREAM: ("server_error", "upstream_error"),
    None: ("server_error", "upstream_error"),
}


# The shape in the OpenAPI document (`OpenAIErrorBody`, which both doors' `schemas` hold).
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {
                    "type": ["string", "null"],
                    "description": "the offending parameter, e.g. messages.2.tool_call_id",
                },
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


def error_body(error: BadRequest) -> dict[str, Any]:
    """A request refused before its turn started, in OpenAI's shape."""
    return {"error": {"message": error.message, "type": STATUS_TYPES.get(error.status, error.type), "param": error.param,
                      "code": error.type}}  # fmt: skip


def error_of(failure: Failure | None, message: str) -> dict[str, Any]:
    """The `error` object of a turn that failed (or a token count the vendor failed)."""
    type_, code = FAILURE_TYPES[failure]
    return {"message": message, "type": type_, "param": None, "code": code}
