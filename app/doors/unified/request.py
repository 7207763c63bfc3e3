"""Decode `/v1/stream` and `/v1/complete` bodies: the unified request itself (docs/api.md §3)."""

from __future__ import annotations

from typing import Any, Mapping

from app.doors.validation import validate
from app.contract.request import StreamRequest
from app.doors.base import DoorRequest


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    return DoorRequest(unified=validate(body, StreamRequest))
