"""Errors in Anthropic's shape: `{"type": "error", "error": {"type", "message"}, "request_id"?}`.

A request refused before its turn starts keeps the gateway's status; its `error.type` follows the status
(`error_type`) and its message names the field in Anthropic's terms (`stop_sequences`, not `options.stop`).
A turn that fails is answered by what ended it (`turn_error`): as an HTTP status when nothing was sent yet
(not streaming, or streaming before `message_start`), as `event: error` once the stream has started.
"""

from __future__ import annotations

from typing import Any

from app.doors.errors import BadRequest
from app.contract.failures import ErrorKind, Failure
from app.core.settled import SettledTurn
from app.stream.message import CUT_INSIDE_ARGUMENTS
from app.doors.base import REQUEST_ID

STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# The unified request's field names (in refusals from the resolver and the adapters) → this wire's.
PARAM_NAMES = {
    "options.stop": "stop_sequences",
    "options.toolChoice": "tool_choice",
    "options.topP": "top_p",
    "options.temperature": "temperature",
    "options.maxTokens": "max_tokens",
    "options.reasoning": "thinking",
    "options.metadata": "metadata",
    "context.tools": "tools",
    "context.messages": "messages",
    "context.systemPrompt": "system",
}
# How a failed turn is answered: status and Anthropic error type (see `app.core.settled` for the failures).
FAILURE_STATUS = {
    Failure.REFUSED: 400,  # a refusal or safety stop: `invalid_request_error`, as Anthropic's own API answers it
    Failure.RATE_LIMITED: 429,
    Failure.OVERLOADED: 529,
    Failure.TIMEOUT: 504,
    Failure.SHUTTING_DOWN: 503,
    Failure.UPSTREAM: 502,
}


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return STATUS_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(type_: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "error", "error": {"type": type_, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return body


def refusal_body(error: BadRequest) -> dict[str, Any]:
    """A request refused before its turn started (the door's own checks, auth, limits, the resolver, an
    adapter's `check_request`): the message starts with the field at fault, named as this wire names it."""
    message = error.message
    if error.param:
        field = PARAM_NAMES.get(error.param, error.param)
        if not message.startswith(f"{field}:"):
            message = f"{field}: {message}"
    return error_body(error_type(error.status), message, REQUEST_ID.get())


# The error type of a stream's `event: error` for a tool call the vendor cut inside its arguments (the token limit
# cut them, or the stream ended inside them, `CUT_INSIDE_ARGUMENTS` in the message): Claude Code
# finalizes an answer that ended with a server error (`api_error`) as "Server error mid-response", without the
# message; an `invalid_request_error` it shows to its user as `API Error: <message>`, and the message names the
# call and why it was cut.
CUT_TOOL_CALL_TYPE = "invalid_request_error"


def turn_error(result: SettledTurn, streaming: bool = False) -> tuple[int, dict[str, Any]]:
    """Status and body for a turn that ended in error (`failure_error`); on a started stream (`streaming`), a
    tool call cut inside its arguments is an `invalid_request_error` naming the call (`CUT_TOOL_CALL_TYPE`)."""
    status, body = failure_error(result.failure, result.status, result.error_message or "error", result.request_id)
    if streaming and (result.kind == ErrorKind.TOOL_ARGUMENTS or CUT_INSIDE_ARGUMENTS in result.error_message):
        body["error"]["type"] = CUT_TOOL_CALL_TYPE
    return status, body


def failure_error(
    failure: Failure | None, status: int, message: str, request_id: str | None = None
) -> tuple[int, dict[str, Any]]:
    """Status and body for a vendor failure (a turn's, or a token count's). A vendor that rejected the
    request keeps its 4xx status (no retry helps); a refusal or safety stop (`Failure.REFUSED`, a blocked
    prompt included) is a 400 `invalid_request_error` naming the vendor's reason, the answer to this request's
    content (a 5xx would have the SDKs send it again, twice by default); an overloaded vendor is 529 as
    Anthropic's own; a gateway timeout is 504."""
    if failure in (Failure.INVALID_REQUEST, Failure.ABORTED):  # aborted: the client is gone anyway
        answered = status
    else:
        answered = FAILURE_STATUS.get(failure, 502) if failure else 502
    return answered, error_body(error_type(answered), message, request_id)
