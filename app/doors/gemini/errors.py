"""Errors in Google's shape: `{"error": {"code", "message", "status"}}` (`status` the google.rpc code's name),
with a `google.rpc.BadRequest` detail naming the field at fault when there is one.

A request refused before its turn starts keeps the gateway's status, its message starting with the field in
Gemini's terms (`generationConfig.stopSequences`, not `options.stop`). A turn that fails is answered by what
ended it (`turn_error`): as an HTTP status when nothing was sent yet (not streaming, or streaming before the
first chunk), as an `{"error": …}` chunk once the stream has started, which the Google GenAI SDKs raise as an
`APIError` with that code (never a clean end); that chunk also has a candidate with the `finishReason` of the
failure (`finish_reason`) and the message as its `finishMessage`, which a client that reads only candidates
(the Gemini CLI) reports.
"""

from __future__ import annotations

import re
from typing import Any

from app.contract.failures import ErrorKind, Failure
from app.core.settled import SettledTurn
from app.stream.message import CUT_INSIDE_ARGUMENTS
from app.doors.errors import BadRequest

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
# The unified request's field names (in refusals from the resolver and the adapters) → this wire's.
PARAM_NAMES = {
    "options.stop": "generationConfig.stopSequences",
    "options.toolChoice": "toolConfig.functionCallingConfig",
    "options.topP": "generationConfig.topP",
    "options.temperature": "generationConfig.temperature",
    "options.maxTokens": "generationConfig.maxOutputTokens",
    "options.reasoning": "generationConfig.thinkingConfig",
    "context.tools": "tools",
    "context.messages": "contents",
    "context.systemPrompt": "systemInstruction",
}
# How a failed turn is answered: its HTTP status (and so its google.rpc status).
FAILURE_STATUS = {
    Failure.REFUSED: 400,  # a refusal or safety stop answers this request's content: no retry helps
    Failure.RATE_LIMITED: 429,
    Failure.OVERLOADED: 503,
    Failure.TIMEOUT: 504,
    Failure.SHUTTING_DOWN: 503,
    Failure.UPSTREAM: 502,
}


def status_name(code: int) -> str:
    return STATUS_NAMES.get(code, "INTERNAL" if code >= 500 else "INVALID_ARGUMENT")


def error_body(code: int, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status_name(code)}
    if field:
        error["details"] = [{
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": field, "description": message}],
        }]  # fmt: skip
    return {"error": error}


def refusal_body(error: BadRequest) -> dict[str, Any]:
    """A request refused before its turn started (the door's own checks, auth, limits, the resolver, an
    adapter's `check_request`): the message starts with the field at fault, named as this wire names it."""
    message = error.message
    field = PARAM_NAMES.get(error.param, error.param) if error.param else None
    if field and not message.startswith(f"{field}:"):
        message = f"{field}: {message}"
    return error_body(error.status, message, field)


def failure_error(failure: Failure | None, status: int, message: str) -> tuple[int, dict[str, Any]]:
    """Status and body for a vendor failure (a turn's, or a token count's): a vendor that rejected the request
    keeps its 4xx status; a refusal or safety stop is a 400 naming the vendor's reason; an overloaded vendor 503;
    a gateway timeout 504; anything else 502."""
    if failure in (Failure.INVALID_REQUEST, Failure.ABORTED):
        answered = status
    else:
        answered = FAILURE_STATUS.get(failure, 502) if failure else 502
    return answered, error_body(answered, message)


def turn_error(result: SettledTurn) -> tuple[int, dict[str, Any]]:
    return failure_error(result.failure, result.status, result.error_message or "error")


# Gemini's finish reasons for a safety stop; a refusal whose message names none of them is `SAFETY`.
SAFETY_REASONS = ("SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
_NAMED_REASON = re.compile(r"finishReason=([A-Z_]+)")


def finish_reason(result: SettledTurn) -> str:
    """The `finishReason` a stream's error end carries, for clients that read only the candidate (the Gemini CLI
    reports "ended without a finish reason" otherwise): a refusal or safety stop its reason (the vendor's own
    when Gemini named one, else `SAFETY`); a tool call cut inside its arguments `MALFORMED_FUNCTION_CALL`; any
    other failure `OTHER`."""
    message = result.error_message
    if result.failure == Failure.REFUSED:
        named = _NAMED_REASON.search(message)
        return named.group(1) if named and named.group(1) in SAFETY_REASONS else "SAFETY"
    if result.kind == ErrorKind.TOOL_ARGUMENTS or CUT_INSIDE_ARGUMENTS in message:
        return "MALFORMED_FUNCTION_CALL"
    return "OTHER"
