"""Decode pi's `streamProxy()` body: only `model.provider` and `model.id` are used (never `baseUrl` or
`headers`, so no request can send the gateway's keys to an address of the client's choosing)."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError

from app.doors.validation import validate
from app.doors.errors import BadRequest
from app.contract.request import PiStreamRequest
from app.doors.base import DoorRequest


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    request = validate(body, PiStreamRequest)
    try:
        return DoorRequest(unified=request.unified())
    except ValidationError:  # e.g. a provider name that cannot form a `<provider>/<model id>` reference
        raise BadRequest(422, "validation_error", "model: provider and id do not name a model", param="model") from None
