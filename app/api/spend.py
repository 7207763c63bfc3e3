"""Spend and agent sessions over HTTP (docs/admin.md): `GET /v1/spend`, `GET /v1/sessions`,
`GET /v1/sessions/{id}`.

An admin key sees every key's records; a client key only its own (another key's session is a 404, as a missing
one); with authentication off, every caller sees everything. Before reading, this replica's queued record
writes are flushed (as `/v1/requests` does), so a turn that just finished is counted.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.admin.spend import GroupBy, session_view, sessions, spend, spend_csv
from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response
from app.contract.refusals import NotAuthenticated
from app.gateway import Gateway

log = logging.getLogger("gateway.spend")
router = APIRouter()

DAY_MS = 86_400_000
DEFAULT_RANGE_MS = 30 * DAY_MS
READ_YOUR_WRITES_WAIT_S = 2.0


async def _scope(request: Request) -> tuple[Gateway, str | None]:
    """The gateway and the key whose records the caller may read (None: every key's)."""
    gateway: Gateway = request.app.state.gateway
    credentials = authorization(request.headers)
    if gateway.admin.enabled:
        try:
            gateway.admin.identify(credentials)
            key_id = None
        except NotAuthenticated:
            key_id = gateway.keys.identify(credentials)
    else:
        key_id = gateway.keys.identify(credentials)
    await gateway.flush_records(READ_YOUR_WRITES_WAIT_S)
    return gateway, key_id


def _time(value: str | None, default: int, name: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date or date-time (UTC unless it says otherwise)."""
    if value is None:
        return default
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(400, "invalid_request", f"{name}: epoch milliseconds or an ISO 8601 date", param=name) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return int(parsed.timestamp() * 1000)


async def _records(
    gateway: Gateway, from_ms: int, to_ms: int, key_id: str | None, session: str | None = None
) -> list[dict[str, Any]]:
    try:
        return await gateway.admin.store.records(from_ms, to_ms, key_id, session)
    except Exception as exc:
        log.warning("spend: reading the records failed: %s", type(exc).__name__)
        raise ApiError(
            503, "store_unavailable", "the request ledger is unavailable, try again", headers={"Retry-After": "1"}
        ) from None


def _range(from_: str | None, to: str | None) -> tuple[int, int]:
    to_ms = _time(to, int(time.time() * 1000) + 1, "to")
    return _time(from_, to_ms - DEFAULT_RANGE_MS, "from"), to_ms


@router.get(
    "/v1/spend",
    tags=["admin"],
    summary="Spend (USD), turns and tokens per key, team, user, tag, …",
    responses={
        200: {
            "description": "The report: JSON, or CSV with `format=csv`",
            "content": {"application/json": {}, "text/csv": {"schema": {"type": "string"}}},
        }
    },
)
async def get_spend(
    request: Request,
    groupBy: GroupBy = Query(default="key"),
    from_: str | None = Query(
        default=None, alias="from", max_length=40, description="epoch ms or ISO 8601; default: `to` − 30 days"
    ),
    to: str | None = Query(default=None, max_length=40, description="epoch ms or ISO 8601 (exclusive); default: now"),
    answer_format: Literal["json", "csv"] = Query(default="json", alias="format"),
) -> Response:
    gateway, key_id = await _scope(request)
    from_ms, to_ms = _range(from_, to)
    report = spend(await _records(gateway, from_ms, to_ms, key_id), groupBy)
    report.update({"from": from_ms, "to": to_ms, "key": key_id})
    if answer_format == "csv":
        return Response(spend_csv(report), media_type="text/csv")
    return json_response(report)


@router.get("/v1/sessions", tags=["admin"], summary="Agent sessions, most recently active first, with totals")
async def list_sessions(
    request: Request,
    from_: str | None = Query(default=None, alias="from", max_length=40),
    to: str | None = Query(default=None, max_length=40),
    limit: int = Query(default=50, ge=1, le=500),
) -> Response:
    gateway, key_id = await _scope(request)
    from_ms, to_ms = _range(from_, to)
    return json_response({"sessions": sessions(await _records(gateway, from_ms, to_ms, key_id), limit)})


@router.get("/v1/sessions/{session}", tags=["admin"], summary="One agent session: its turns in order and totals")
async def get_session(request: Request, session: str) -> Response:
    gateway, key_id = await _scope(request)
    records = await _records(gateway, 0, int(time.time() * 1000) + DAY_MS, key_id, session)
    if not records:
        raise ApiError(404, "not_found", "no session with this id for this key", param="session")
    return json_response(session_view(session, records))
