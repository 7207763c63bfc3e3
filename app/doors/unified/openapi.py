"""The door's entry in the OpenAPI document (`app.api.openapi`): `/v1/stream` and `/v1/complete` take the
`StreamRequest`, answer `StreamEvent` frames or one `AssistantMessage`, and errors as `ErrorBody` (those
schemas come from the contract models, `app.api.openapi`). The error descriptions and the SSE answer are
shared with pi's door and the gateway's other routes (`app.doors.openapi`)."""

from __future__ import annotations

from typing import Any

from app.doors.openapi import TURN_CODES, errors, json_body, ref, request_body, stream_ok

EXAMPLE = {
    "model": "anthropic/claude-sonnet-4-5",
    "fallback": ["openai/gpt-5-mini"],
    "context": {"systemPrompt": "You are terse.", "messages": [{"role": "user", "content": "Hello"}]},
    "options": {"maxTokens": 256, "throttleMs": 50},
}


def stream_operation() -> dict[str, Any]:
    return {
        "requestBody": request_body("StreamRequest", EXAMPLE),
        "responses": {"200": stream_ok(), **errors(TURN_CODES)},
    }


def complete_operation() -> dict[str, Any]:
    responses = {
        "200": json_body(ref("AssistantMessage"), "The turn ended in stop, length or toolUse"),
        "502": json_body(ref("CompleteError"), "The turn ended in error (upstream failure, timeout, ...)"),
        **errors(TURN_CODES),
    }
    return {"requestBody": request_body("StreamRequest", EXAMPLE), "responses": responses}
