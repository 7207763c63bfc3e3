"""`POST /v1/messages/count_tokens` (also `?beta=true`): Anthropic's token counting request and answer.

The body is a Messages request (`model`, `messages`, `system`, `tools`, `tool_choice`, `thinking`, …; no
`max_tokens`), decoded by the door's own `decode` into the same unified request a turn would send, so the
serving vendor counts exactly what the turn would send it. The answer is `{"input_tokens": N}`, N being the
vendor's count; a vendor failure is an error in Anthropic's shape (`errors.failure_error`).
"""

from __future__ import annotations

from typing import Any, Mapping

from app.doors.anthropic_messages import request
from app.doors.anthropic_messages.errors import failure_error
from app.contract.failures import Failure
from app.doors.base import DoorRequest

PATH = "/v1/messages/count_tokens"


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    """The door's `decode` of a turn, for a body without `max_tokens` (a count has none; a turn must have it).
    The output limit does not change what the vendor counts."""
    if body.get("max_tokens") is None:
        body = {**body, "max_tokens": 1}
    return request.decode(body, headers)


def answer(tokens: int) -> dict[str, Any]:
    """Anthropic's `MessageTokensCount`."""
    return {"input_tokens": tokens}


def failed(failure: Failure, status: int, message: str, request_id: str) -> tuple[int, dict[str, Any]]:
    return failure_error(failure, status, message, request_id)
