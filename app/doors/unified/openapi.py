"""The door's entry in the OpenAPI document (`app.api.openapi`): `/v1/stream` and `/v1/complete` take the
`StreamRequest`, answer `StreamEvent` frames or one `AssistantMessage`, and errors as `ErrorBody` (those
schemas come from the contract models, `app.api.openapi`). The error descriptions and the SSE answer are
shared with pi's door and the gateway's other routes."""

from __future__ import annotations

from typing import Any

from app.doors.openapi import ref

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
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "string"}}}
_EVENT_DOC = (
    "Server-sent events. Each frame is `id: <n>`, `event: <type>`, `data: <one JSON object whose type equals "
    "event>`; `: ping` comment lines are keep-alives. The stream ends after exactly one terminal event, "
    "`done` or `error`. The schema below is that of one frame's `data`."
)
EXAMPLE = {
    "model": "anthropic/claude-sonnet-4-5",
    "fallback": ["openai/gpt-5-mini"],
    "context": {"systemPrompt": "You are terse.", "messages": [{"role": "user", "content": "Hello"}]},
    "options": {"maxTokens": 256, "throttleMs": 50},
}


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


def stream_operation() -> dict[str, Any]:
    return {"requestBody": request_body("StreamRequest", EXAMPLE), "responses": {"200": stream_ok(), **errors(TURN_CODES)}}


def complete_operation() -> dict[str, Any]:
    responses = {
        "200": json_body(ref("AssistantMessage"), "The turn ended in stop, length or toolUse"),
        "502": json_body(ref("CompleteError"), "The turn ended in error (upstream failure, timeout, ...)"),
        **errors(TURN_CODES),
    }
    return {"requestBody": request_body("StreamRequest", EXAMPLE), "responses": responses}
