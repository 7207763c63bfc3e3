"""Errors in pi's shape: pi's client shows `error` as a string."""

from __future__ import annotations

from typing import Any

from app.doors.errors import BadRequest


def error_body(error: BadRequest) -> dict[str, Any]:
    return {"error": error.message}
