"""Request records over HTTP (docs/api.md §1, §10): one record by id, or the caller's most recent ones.

Both are scoped to the caller's key: a record of another key is answered exactly like a missing one (404),
so ids cannot be probed. With authentication off every caller sees every record. Before reading, the
route waits briefly for the queued record writes of this process and, with Redis, of every other gateway process
(`Gateway.flush_records`), so a client sees its own finished request whichever worker or replica ran it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response
from app.doors.registry import DoorName
from app.gateway import Gateway

log = logging.getLogger("gateway.records")
router = APIRouter()

READ_YOUR_WRITES_WAIT_S = 2.0
Outcome = Literal["done", "error", "aborted", "interrupted"]


def _unavailable(exc: Exception) -> ApiError:
    log.warning("request ledger read failed: %s", type(exc).__name__)
    return ApiError(
        503, "store_unavailable", "the request ledger is unavailable, try again", headers={"Retry-After": "1"}
    )


async def _scope(request: Request) -> tuple[Gateway, str | None]:
    gateway: Gateway = request.app.state.gateway
    key_id = gateway.keys.identify(authorization(request.headers))
    await gateway.flush_records(READ_YOUR_WRITES_WAIT_S)
    return gateway, key_id


@router.get("/v1/requests/{request_id}", tags=["records"], summary="One request record, for the key that made it")
async def get_record(request: Request, request_id: str) -> Response:
    gateway, key_id = await _scope(request)
    try:
        record = await gateway.ledger.get(request_id, key_id)
    except Exception as exc:
        raise _unavailable(exc) from None
    if record is None:
        raise ApiError(404, "not_found", "no request record with this id", param="requestId")
    return json_response(record)


FILTER_SCAN = 200  # with a filter, the newest records of the key that are searched for matches


@router.get("/v1/requests", tags=["records"], summary="The caller's most recent request records, newest first")
async def list_records(
    request: Request,
    limit: int = Query(default=20, ge=1, le=200),
    outcome: Outcome | None = Query(default=None, description="only records with this outcome"),
    model: str | None = Query(
        default=None,
        max_length=256,
        description="only records whose requested or actual `<provider>/<model>`, or pool deployment, contains this",
    ),
    door: DoorName | None = Query(default=None, description="only records of requests that came through this door"),
) -> Response:
    """With `outcome`, `model` or `door`, the newest `limit` matches among the key's 200 newest records."""
    gateway, key_id = await _scope(request)
    filtered = outcome is not None or bool(model) or door is not None
    try:
        records = await gateway.ledger.list(key_id, FILTER_SCAN if filtered else limit)
    except Exception as exc:
        raise _unavailable(exc) from None
    if filtered:
        records = [r for r in records if _matches(r, outcome, model) and (door is None or r.get("door") == door)][
            :limit
        ]
    return json_response({"records": records})


def _matches(record: dict[str, Any], outcome: str | None, model: str | None) -> bool:
    if outcome is not None and record.get("outcome") != outcome:
        return False
    if model:
        actual = f"{record.get('provider') or ''}/{record.get('model') or ''}"
        deployment = record.get("deployment") or ""  # a pool's deployment (docs/pools.md)
        return model in (record.get("requestedModel") or "") or model in actual or model in deployment
    return True
