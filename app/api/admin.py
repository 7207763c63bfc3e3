"""The admin API over HTTP (docs/admin.md): managed keys, teams and the audit log, for admin keys only.

Every route first names the admin (`Admin.identify`: an admin key from `GATEWAY_ADMIN_KEYS`; a client key is
refused 401 like an unknown one), then calls `app.admin.service.Admin`, whose `AdminError`s are answered here in
the unified error shape.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, TypeVar

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.admin.models import KeyFields, KeyPatch, Rotate, TeamFields, TeamPatch
from app.admin.service import Admin, AdminError
from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response

router = APIRouter()
T = TypeVar("T")
_STATUS = {"not_found": 404, "conflict": 409, "read_only": 409, "admin_off": 404}


def _admin(request: Request) -> tuple[Admin, str]:
    admin: Admin = request.app.state.gateway.admin
    try:
        return admin, admin.identify(authorization(request.headers))
    except AdminError as error:
        raise _api_error(error) from None


def _api_error(error: AdminError) -> ApiError:
    return ApiError(_STATUS[error.kind], error.kind, error.message, param=error.param)


async def _answer(call: Callable[[], Awaitable[T]], status: int = 200) -> Response:
    try:
        result: Any = await call()
    except AdminError as error:
        raise _api_error(error) from None
    return json_response(result, status)


@router.post(
    "/v1/admin/keys", status_code=201, tags=["admin"], summary="Create a managed key (its secret is answered once)"
)
async def create_key(request: Request, body: KeyFields) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.create_key(actor, body), 201)


@router.get("/v1/admin/keys", tags=["admin"], summary="Every key: managed, and from env and the keys file")
async def list_keys(request: Request) -> Response:
    admin, _ = _admin(request)
    return await _answer(lambda: _wrapped("keys", admin.list_keys()))


@router.get("/v1/admin/keys/{name}", tags=["admin"], summary="One key")
async def get_key(request: Request, name: str) -> Response:
    admin, _ = _admin(request)
    return await _answer(lambda: admin.get_key(name))


@router.patch("/v1/admin/keys/{name}", tags=["admin"], summary="Change a managed key's fields (not its secret)")
async def update_key(request: Request, name: str, body: KeyPatch) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.update_key(actor, name, body))


@router.post("/v1/admin/keys/{name}/rotate", tags=["admin"], summary="A new secret; the old one valid overlapSeconds")
async def rotate_key(request: Request, name: str, body: Rotate | None = None) -> Response:
    admin, actor = _admin(request)
    overlap = body.overlapSeconds if body is not None else 0
    return await _answer(lambda: admin.rotate_key(actor, name, overlap))


@router.delete("/v1/admin/keys/{name}", tags=["admin"], summary="Revoke a managed key on every replica")
async def revoke_key(request: Request, name: str) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.revoke_key(actor, name))


@router.post("/v1/admin/teams", status_code=201, tags=["admin"], summary="Create a team")
async def create_team(request: Request, body: TeamFields) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.create_team(actor, body), 201)


@router.get("/v1/admin/teams", tags=["admin"], summary="Every team")
async def list_teams(request: Request) -> Response:
    admin, _ = _admin(request)
    return await _answer(lambda: _wrapped("teams", admin.list_teams()))


@router.get("/v1/admin/teams/{name}", tags=["admin"], summary="One team")
async def get_team(request: Request, name: str) -> Response:
    admin, _ = _admin(request)
    return await _answer(lambda: admin.get_team(name))


@router.patch("/v1/admin/teams/{name}", tags=["admin"], summary="Change a team's limits, budgets or metadata")
async def update_team(request: Request, name: str, body: TeamPatch) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.update_team(actor, name, body))


@router.delete("/v1/admin/teams/{name}", tags=["admin"], summary="Delete a team that has no keys")
async def delete_team(request: Request, name: str) -> Response:
    admin, actor = _admin(request)
    return await _answer(lambda: admin.delete_team(actor, name))


@router.get("/v1/admin/audit", tags=["admin"], summary="Admin changes, newest first: who, what, when, before/after")
async def audit(
    request: Request,
    limit: int = Query(default=100, ge=1, le=1000),
    before: int | None = Query(default=None, ge=1, description="only entries older than the entry with this id"),
) -> Response:
    admin, _ = _admin(request)
    return await _answer(lambda: _wrapped("entries", admin.audit(limit, before)))


async def _wrapped(name: str, items: Awaitable[list[dict[str, Any]]]) -> dict[str, Any]:
    return {name: await items}
