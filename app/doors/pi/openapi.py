"""The door's entry in the OpenAPI document (`app.api.openapi`): `/api/stream` takes the `PiStreamRequest`,
answers the unified `StreamEvent` frames, and errors as `PiErrorBody` (the message as a string)."""

from __future__ import annotations

from typing import Any

from app.doors.openapi import TURN_CODES, errors, request_body, stream_ok

EXAMPLE = {
    "model": {"provider": "anthropic", "id": "claude-sonnet-4-5"},
    "context": {"messages": [{"role": "user", "content": "Hello"}]},
    "options": {"maxTokens": 256},
}


def operation() -> dict[str, Any]:
    return {
        "requestBody": request_body("PiStreamRequest", EXAMPLE),
        "responses": {"200": stream_ok(), **errors(TURN_CODES, "PiErrorBody")},
    }
