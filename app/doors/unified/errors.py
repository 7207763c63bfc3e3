"""Errors in the gateway's own shape (docs/api.md §9): `{"error": {"type", "message", "param"}}`."""

from __future__ import annotations

from typing import Any

from app.doors.errors import BadRequest


def error_body(error: BadRequest) -> dict[str, Any]:
    return {"error": {"type": error.type, "message": error.message, "param": error.param}}
