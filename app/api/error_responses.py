"""Errors found before streaming starts: plain HTTP errors with a JSON body (docs/api.md §9).

`/v1/*` answers `{"error": {"type", "message", "param"}}`; a door's routes answer in the door's own shape
(`Door.error_body`: pi's `{"error": "<message>"}`, OpenAI's and Anthropic's).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from app.doors.base import Door
from app.doors.errors import BadRequest
from app.contract.refusals import (
    AtCapacity,
    Draining,
    EventsLost,
    EventStoreUnavailable,
    LimitExceeded,
    LimitsUnavailable,
    ModelNotAllowed,
    NotAuthenticated,
    Refusal,
    RequestRejected,
    TokensNotCounted,
    UnknownModel,
    UnpricedModel,
)


class ApiError(BadRequest):
    """A `BadRequest` the HTTP edge raises itself (auth, body limits, records); a door's own are `BadRequest`s,
    answered by the same rules (`error_response`)."""

    def body(self) -> dict[str, Any]:
        return error_body(self)

    def response(self) -> Response:
        return error_response(self)


def error_body(error: BadRequest) -> dict[str, Any]:
    """docs/api.md §9: `{"error": {"type", "message", "param"}}`, the shape of every route without a door."""
    return {"error": {"type": error.type, "message": error.message, "param": error.param}}


def error_response(error: BadRequest, door: Door | None = None) -> Response:
    """`error` in `door`'s error shape (`error_body`'s without one), with its status and headers."""
    body = error_body(error) if door is None else door.error_body(error)
    return json_response(body, error.status, error.headers)


def refusal_error(refusal: Refusal) -> ApiError:
    """The HTTP status and body for a refusal from the gateway core (the only place that maps them)."""
    if isinstance(refusal, NotAuthenticated):
        return ApiError(401, "authentication_error", refusal.message, headers={"WWW-Authenticate": "Bearer"})
    if isinstance(refusal, UnknownModel):
        return ApiError(404, "model_not_found", refusal.message, param=refusal.param)
    if isinstance(refusal, AtCapacity):
        return ApiError(429, "too_many_streams", refusal.message, headers={"Retry-After": "1"})
    if isinstance(refusal, LimitExceeded):
        return ApiError(429, refusal.kind, refusal.message, headers={"Retry-After": str(refusal.retry_after)})
    if isinstance(refusal, ModelNotAllowed):
        return ApiError(403, "model_not_allowed", refusal.message, param=refusal.param)
    if isinstance(refusal, UnpricedModel):
        return ApiError(403, "model_not_priced", refusal.message, param=refusal.param)
    if isinstance(refusal, LimitsUnavailable):
        return ApiError(503, "limits_unavailable", refusal.message, headers={"Retry-After": "1"})
    if isinstance(refusal, EventsLost):
        return ApiError(410, "resume_unavailable", refusal.message)
    if isinstance(refusal, EventStoreUnavailable):
        return ApiError(503, "event_store_unavailable", refusal.message, headers={"Retry-After": "1"})
    if isinstance(refusal, Draining):
        return ApiError(503, "shutting_down", refusal.message, headers={"Retry-After": "1"})
    if isinstance(refusal, TokensNotCounted):
        # 400, not 501: nothing the client can retry would change it (the SDKs send a 5xx again), and the
        # request is what names a model whose api cannot count.
        return ApiError(400, "tokens_not_counted", refusal.message, param=refusal.param)
    if isinstance(refusal, RequestRejected):
        return ApiError(400, "invalid_request", refusal.message, param=refusal.param)
    return ApiError(400, "invalid_request", refusal.message, param=refusal.param)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, headers=headers, media_type="application/json")
