"""`POST /v1/responses/input_tokens`: OpenAI's input token count of a Responses request.

The body is a Responses request without the output settings (`model`, `input`, `instructions`, `tools`,
`tool_choice`, `reasoning`, `text`, …), decoded by the door's own `decode` into the unified request a turn would
send, so the serving vendor counts exactly what the turn would send it (`app.api.count_tokens`). The answer is
`{"object": "response.input_tokens", "input_tokens": N}`, N being the vendor's count, never an estimate.
`previous_response_id` is refused here: a count reads no stored response (send the whole conversation).
"""

from __future__ import annotations

from typing import Any, Mapping

from app.contract.failures import Failure
from app.doors.base import DoorRequest
from app.doors.fields import unsupported
from app.doors.openai_errors import error_of
from app.doors.openai_responses import request

PATH = "/v1/responses/input_tokens"


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    if body.get("previous_response_id") is not None:
        raise unsupported(
            "previous_response_id", "a count reads no stored response: send the whole conversation in input"
        )
    return request.decode(body, headers)


def answer(tokens: int) -> dict[str, Any]:
    """OpenAI's `InputTokenCountResponse`."""
    return {"object": "response.input_tokens", "input_tokens": tokens}


def failed(failure: Failure, status: int, message: str, request_id: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": error_of(failure, message)}
