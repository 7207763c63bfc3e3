"""The admin API's domain (docs/admin.md): who is an admin, the managed keys and teams, the audit log, and the
sync that makes every change count on every replica within `GATEWAY_ADMIN_SYNC_INTERVAL`.

Every change is one transaction of the store (`app.admin.store`): the row, its audit entry and the version bump.
Each replica polls the version and, when it moved, reloads the managed keys into `ClientKeys` (authentication
and the per-key limits read them from there); the replica that made the change reloads at once. So a key
created on one replica works on every other within the poll interval plus one read, and a revoked one is
refused as fast. A secret is generated here, answered once, and stored only as its SHA-256 digest.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import re
import secrets
import time
from typing import Any, Literal

from app.admin.models import KeyFields, KeyPatch, TeamFields, TeamPatch
from app.admin.store import AdminConflict, AuditEntry, KeyWrite, SqlAdminStore, StoredKey, TeamWrite
from app.contract.refusals import NotAuthenticated
from app.policy.keyring import ClientKey, KeyRing
from app.policy.keys import ClientKeys, KeyPolicy, ManagedKey

log = logging.getLogger("gateway.admin")

ErrorKind = Literal["not_found", "conflict", "read_only", "admin_off"]
SECRET_PREFIX = "gw-"
_DIGEST_SECRET = re.compile(r"^sha256:([0-9a-fA-F]{64})$")


class AdminError(Exception):
    """An admin request that cannot be done as asked; the edge answers it with the kind's status."""

    def __init__(self, kind: ErrorKind, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param


def admin_ring(keys: list[ClientKey]) -> KeyRing:
    """The admin keys' ring: a key given as `sha256:<hex>` is a digest, any other a secret."""
    plain = [key for key in keys if not _DIGEST_SECRET.match(key.secret)]
    digests = []
    for key in keys:
        found = _DIGEST_SECRET.match(key.secret)
        if found:
            digests.append((key.name, bytes.fromhex(found.group(1))))
    return KeyRing(plain, digests)


def now_ms() -> int:
    return int(time.time() * 1000)


class Admin:
    def __init__(
        self, store: SqlAdminStore, keys: ClientKeys, admin_keys: list[ClientKey], sync_interval: float
    ) -> None:
        self.store = store
        self.keys = keys
        self.ring = admin_ring(admin_keys)
        self.sync_interval = sync_interval
        self.teams: dict[str, dict[str, Any]] = {}  # the managed teams as last synced
        self._version: int | None = None
        self._sync_lock = asyncio.Lock()
        self._change_lock = asyncio.Lock()  # this replica's read-modify-write of one change at a time
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.ring.enabled

    def identify(self, authorization: str | None) -> str:
        """The admin key's name; `AdminError("admin_off")` without admin keys, `NotAuthenticated` for any
        other key (a client key never reaches the admin API)."""
        if not self.enabled:
            raise AdminError("admin_off", "the admin API is off: set GATEWAY_ADMIN_KEYS")
        name = self.ring.identify(authorization)
        if name is None:  # unreachable: the ring is enabled
            raise NotAuthenticated("invalid admin key")
        return name

    async def start(self) -> None:
        await self.store.start()
        await self.sync()
        self._task = asyncio.create_task(self._sync_forever(), name="gateway-admin-sync")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.store.aclose()

    async def sync(self, force: bool = False) -> None:
        """Reload the managed keys and teams when the store's version moved (or `force`)."""
        async with self._sync_lock:
            version = await self.store.version()
            if version == self._version and not force:
                return
            stored = await self.store.keys()
            self.teams = {team["name"]: team for team in await self.store.teams()}
            self.keys.set_managed(
                tuple(_managed(key) for key in stored),
                {name: _team_policy(team) for name, team in self.teams.items()},
            )
            self._version = version

    async def _sync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sync_interval)
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is down: keep the keys as they are, try again
                log.warning("admin: reloading the managed keys failed (%s); retrying", type(exc).__name__)

    # Keys.

    async def list_keys(self) -> list[dict[str, Any]]:
        managed = [_view(key) for key in await self.store.keys()]
        configured = [_configured_view(name, source, policy) for name, source, policy in self.keys.configured()]
        return configured + managed

    async def get_key(self, name: str) -> dict[str, Any]:
        for listed, source, policy in self.keys.configured():
            if listed == name:
                return _configured_view(name, source, policy)
        return _view(await self._stored_key(name))

    async def create_key(self, actor: str, fields: KeyFields) -> dict[str, Any]:
        async with self._change_lock:
            self._refuse_configured(fields.name)
            await self._require_team(fields.team)
            secret = SECRET_PREFIX + secrets.token_urlsafe(32)
            at = now_ms()
            document = {**fields.model_dump(mode="json"), "createdAt": at, "updatedAt": at}
            key = StoredKey(fields.name, _digest(secret), None, None, document)
            await self._commit([KeyWrite(fields.name, key, create=True)], actor, "key.create", fields.name, None, key)
        return {**_view(key), "secret": secret}

    async def update_key(self, actor: str, name: str, patch: KeyPatch) -> dict[str, Any]:
        async with self._change_lock:
            before = await self._stored_key(name)
            changes = patch.model_dump(mode="json", exclude_unset=True)
            if changes.get("name") is None:
                changes.pop("name", None)
            new_name = changes.get("name", name)
            if new_name != name:
                self._refuse_configured(new_name)
            if "team" in changes:
                await self._require_team(changes["team"])
            for field, empty in (("limits", {}), ("budgets", {}), ("models", []), ("metadata", {}), ("tags", [])):
                if field in changes and changes[field] is None:
                    changes[field] = empty
            fields = KeyFields.model_validate({**_fields_of(before.document), **changes})
            document = {**fields.model_dump(mode="json"), "createdAt": before.document.get("createdAt"),
                        "updatedAt": now_ms()}  # fmt: skip
            after = StoredKey(new_name, before.digest, before.previous_digest, before.previous_until_ms, document)
            await self._commit([KeyWrite(name, after)], actor, "key.update", name, before, after)
        return _view(after)

    async def rotate_key(self, actor: str, name: str, overlap_seconds: int) -> dict[str, Any]:
        async with self._change_lock:
            before = await self._stored_key(name)
            secret = SECRET_PREFIX + secrets.token_urlsafe(32)
            at = now_ms()
            previous = (before.digest, at + overlap_seconds * 1000) if overlap_seconds > 0 else (None, None)
            document = {**before.document, "updatedAt": at, "rotatedAt": at}
            after = StoredKey(name, _digest(secret), previous[0], previous[1], document)
            await self._commit([KeyWrite(name, after)], actor, "key.rotate", name, before, after)
        return {**_view(after), "secret": secret}

    async def revoke_key(self, actor: str, name: str) -> dict[str, Any]:
        async with self._change_lock:
            before = await self._stored_key(name)
            await self._commit([KeyWrite(name, None)], actor, "key.revoke", name, before, None)
        return {**_view(before), "revoked": True}

    # Teams.

    async def list_teams(self) -> list[dict[str, Any]]:
        return await self.store.teams()

    async def get_team(self, name: str) -> dict[str, Any]:
        team = await self.store.team(name)
        if team is None:
            raise AdminError("not_found", f"no team named {name!r}", "name")
        return team

    async def create_team(self, actor: str, fields: TeamFields) -> dict[str, Any]:
        async with self._change_lock:
            at = now_ms()
            document = {**fields.model_dump(mode="json"), "createdAt": at, "updatedAt": at}
            await self._commit_team(TeamWrite(fields.name, document, create=True), actor, "team.create", None)
        return document

    async def update_team(self, actor: str, name: str, patch: TeamPatch) -> dict[str, Any]:
        async with self._change_lock:
            before = await self.get_team(name)
            changes = {k: v for k, v in patch.model_dump(mode="json", exclude_unset=True).items() if v is not None}
            fields = TeamFields.model_validate({**_fields_of(before, TeamFields), **changes})
            document = {**fields.model_dump(mode="json"), "createdAt": before.get("createdAt"), "updatedAt": now_ms()}
            await self._commit_team(TeamWrite(name, document), actor, "team.update", before)
        return document

    async def delete_team(self, actor: str, name: str) -> dict[str, Any]:
        async with self._change_lock:
            before = await self.get_team(name)
            members = [key.name for key in await self.store.keys() if key.document.get("team") == name]
            if members:
                raise AdminError("conflict", f"team {name!r} still has keys: {', '.join(members[:10])}", "name")
            await self._commit_team(TeamWrite(name, None), actor, "team.delete", before)
        return {**before, "deleted": True}

    async def audit(self, limit: int, before_id: int | None) -> list[dict[str, Any]]:
        return await self.store.audit(limit, before_id)

    # Helpers.

    async def _stored_key(self, name: str) -> StoredKey:
        if any(listed == name for listed, _, _ in self.keys.configured()):
            raise AdminError("read_only", f"key {name!r} comes from GATEWAY_API_KEYS or the keys file", "name")
        key = await self.store.key(name)
        if key is None:
            raise AdminError("not_found", f"no managed key named {name!r}", "name")
        return key

    def _refuse_configured(self, name: str) -> None:
        if any(listed == name for listed, _, _ in self.keys.configured()):
            raise AdminError("conflict", f"a key named {name!r} comes from GATEWAY_API_KEYS or the keys file", "name")

    async def _require_team(self, team: str | None) -> None:
        if team is not None and await self.store.team(team) is None:
            raise AdminError("not_found", f"no team named {team!r}: create it first (POST /v1/admin/teams)", "team")

    async def _commit(
        self,
        writes: list[KeyWrite | TeamWrite],
        actor: str,
        action: str,
        target: str,
        before: StoredKey | None,
        after: StoredKey | None,
    ) -> None:
        audit = AuditEntry(now_ms(), actor, action, target, _audited(before), _audited(after))
        try:
            await self.store.commit(writes, audit)
        except AdminConflict:
            raise AdminError("conflict", f"a managed key named {target!r} exists already", "name") from None
        await self.sync(force=True)

    async def _commit_team(self, write: TeamWrite, actor: str, action: str, before: dict[str, Any] | None) -> None:
        audit = AuditEntry(now_ms(), actor, action, write.name, before, write.document)
        try:
            await self.store.commit([write], audit)
        except AdminConflict:
            raise AdminError("conflict", f"a team named {write.name!r} exists already", "name") from None
        await self.sync(force=True)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _managed(key: StoredKey) -> ManagedKey:
    return ManagedKey(key.name, KeyFields.model_validate(_fields_of(key.document)).policy(), key.digests())


def _team_policy(document: dict[str, Any]) -> KeyPolicy:
    """A team's shared limits and budgets as the limit store counts them."""
    team = TeamFields.model_validate(_fields_of(document, TeamFields))
    return KeyPolicy(**team.limits.model_dump(), **team.budgets.model_dump())


def _fields_of(document: dict[str, Any], model: type[KeyFields] | type[TeamFields] = KeyFields) -> dict[str, Any]:
    """The stored document's fields that `model` takes (its times and marks left out)."""
    return {name: copy.deepcopy(value) for name, value in document.items() if name in model.model_fields}


def _view(key: StoredKey) -> dict[str, Any]:
    """A managed key as the API shows it: its fields, `source`, and until when a rotated-out secret is valid."""
    view = {**key.document, "source": "managed"}
    if key.previous_until_ms is not None and key.previous_until_ms > now_ms():
        view["previousSecretValidUntil"] = key.previous_until_ms
    return view


def _audited(key: StoredKey | None) -> dict[str, Any] | None:
    """A key in the audit log: its fields only (never its secret, nor the secret's digest)."""
    return None if key is None else dict(key.document)


def _configured_view(name: str, source: str, policy: KeyPolicy) -> dict[str, Any]:
    return {
        "name": name,
        "source": source,
        "team": policy.team,
        "limits": {
            "requests_per_minute": policy.requests_per_minute,
            "tokens_per_minute": policy.tokens_per_minute,
            "concurrent_streams": policy.concurrent_streams,
        },
        "budgets": {
            "budget_usd_per_day": policy.budget_usd_per_day,
            "budget_usd_per_month": policy.budget_usd_per_month,
            "user_budget_usd_per_day": policy.user_budget_usd_per_day,
            "user_budget_usd_per_month": policy.user_budget_usd_per_month,
            "allow_unpriced_models": policy.allow_unpriced_models,
        },
        "models": list(policy.models),
        "tags": list(policy.tags),
    }
