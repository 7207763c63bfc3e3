"""`POST /v1beta/models/{model}:countTokens`: Gemini's token counting request and answer.

The body is either a `generateContent` body (`contents`, and `systemInstruction`, `tools`, … as a turn would
send them) or `{"generateContentRequest": {…}}` (what the SDKs send to count a whole request), decoded by the
door's own `decode` into the unified request a turn would send, so the serving vendor counts exactly that
(`app.api.count_tokens`). The answer is `{"totalTokens": N}`, N being the vendor's count, never an estimate.
"""

from __future__ import annotations

from typing import Any, Mapping

from app.contract.failures import Failure
from app.doors.base import DoorRequest
from app.doors.fields import fail, object_at
from app.doors.gemini import request
from app.doors.gemini.errors import failure_error


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> DoorRequest:
    inner = body.get("generateContentRequest")
    if inner is not None:
        object_at(inner, "generateContentRequest")
        extra = sorted(set(body) - {"generateContentRequest", request.URL_FIELDS})
        if extra:
            fail(extra[0], "set contents inside generateContentRequest, not next to it")
        body = {**inner, request.URL_FIELDS: body.get(request.URL_FIELDS)}
    return request.decode(body, headers)


def answer(tokens: int) -> dict[str, Any]:
    """Gemini's `CountTokensResponse`."""
    return {"totalTokens": tokens}


def failed(failure: Failure, status: int, message: str, request_id: str) -> tuple[int, dict[str, Any]]:
    return failure_error(failure, status, message)
