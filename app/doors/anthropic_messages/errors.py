"""Errors in Anthropic's shape: `{"type": "error", "error": {"type", "message"}, "request_id"}`.

Two kinds reach a client. A request refused before any upstream call is an HTTP error whose `error.type`
follows its status (`error_type`). A turn that ended in error is an HTTP error too when nothing was sent yet
(non-streaming, or streaming before `message_start`), or `event: error` once the stream has started; its
status and type come from what ended it (`turn_error`). `ErrorShape.retry` becomes the `x-should-retry`
header the Anthropic SDKs obey: the gateway has already retried and fallen back, and a refusal or a vendor
rejecting the request's content will not change on a retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
# ErrorKind values (app.contract.failures) of failures that a retry of the same request will not cure.
FINAL_KINDS = frozenset({"refusal", "stop_reason"})


@dataclass(frozen=True, slots=True)
class ErrorShape:
    status: int
    type: str
    retry: bool | None = None  # None: let the client decide by status

    def headers(self) -> dict[str, str]:
        return {} if self.retry is None else {"x-should-retry": "true" if self.retry else "false"}


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return STATUS_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(type_: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "error", "error": {"type": type_, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return body


def turn_error(*, upstream_status: int | None, kind: str | None, shutting_down: bool = False) -> ErrorShape:
    """How a turn that ended in error is presented: from the last attempt's upstream HTTP status and failure
    kind (`ErrorKind` value), or the gateway shutting down."""
    if shutting_down:
        return ErrorShape(503, "overloaded_error", retry=True)
    if kind in FINAL_KINDS:
        # A refusal or safety stop answers the request's content: the client's request, not the server, is at issue.
        return ErrorShape(400, "invalid_request_error", retry=False)
    if upstream_status is not None:
        if upstream_status == 429:
            return ErrorShape(429, "rate_limit_error")
        if upstream_status in (503, 529):
            return ErrorShape(529, "overloaded_error")
        if upstream_status in (400, 404, 413, 422):
            return ErrorShape(400, "invalid_request_error", retry=False)  # the vendor rejected the content
        if upstream_status in (401, 403):
            return ErrorShape(502, "api_error", retry=False)  # the gateway's own key for the vendor
    if kind == "timeout":
        return ErrorShape(504, "api_error")
    return ErrorShape(502, "api_error")
