"""Where managed keys, teams and the audit log live: the ledger's database (`GATEWAY_DATABASE_URL`), in tables
of their own, through connections of their own (the ledger's writer keeps its batches).

Tables (created by the admin store's own migrations, versioned in `gateway_admin_schema`, so they apply to a
database of any earlier version and never renumber the ledger's):

- `gateway_admin_keys`: one row per managed key: its name, the SHA-256 digest of its secret (never the secret),
  after a rotation with overlap the previous digest and until when it is valid, and the key's fields as JSON;
- `gateway_admin_teams`: one row per team, its fields as JSON;
- `gateway_admin_audit`: every admin change: when, which admin key, what, on what, the fields before and after
  (never a secret or a digest);
- `gateway_admin_state`: one row, `version`, bumped in the same transaction as every change. Each replica polls
  it (`GATEWAY_ADMIN_SYNC_INTERVAL`) and reloads the keys when it moved (`app.admin.service`).

`SqlAdminStore` holds the SQL both databases run; `app.admin.sqlite_store` and `app.admin.postgres_store` give it
a connection, placeholders and the few statements that differ.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from app.ledger.base import LedgerUrlError, decode_row


class AdminConflict(Exception):
    """A create whose name is taken (the database's unique key said so)."""


@dataclass(frozen=True)
class StoredKey:
    name: str
    digest: str  # hex SHA-256 of the current secret
    previous_digest: str | None
    previous_until_ms: int | None
    document: dict[str, Any]  # `KeyFields` as JSON, with createdAt / updatedAt

    def digests(self) -> tuple[tuple[bytes, float], ...]:
        """The secrets' digests this key is accepted with, each until when (epoch seconds)."""
        expires = self.document.get("expiresAt")
        until = math.inf if expires is None else expires / 1000
        accepted = [(bytes.fromhex(self.digest), until)]
        if self.previous_digest is not None and self.previous_until_ms is not None:
            accepted.append((bytes.fromhex(self.previous_digest), min(until, self.previous_until_ms / 1000)))
        return tuple(accepted)


@dataclass(frozen=True)
class KeyWrite:
    """Put (`key` set) or delete (`key` None) the managed key `name`; `create`: the name must be free."""

    name: str
    key: StoredKey | None
    create: bool = False


@dataclass(frozen=True)
class TeamWrite:
    name: str
    document: dict[str, Any] | None
    create: bool = False


@dataclass(frozen=True)
class AuditEntry:
    at_ms: int
    actor: str
    action: str  # key.create, key.update, key.rotate, key.revoke, team.create, team.update, team.delete
    target: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


# One list of DDL per schema version; each statement is written for both databases ({id} and {big} differ).
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS gateway_admin_keys (
            name TEXT PRIMARY KEY,
            digest TEXT NOT NULL UNIQUE,
            previous_digest TEXT,
            previous_until {big},
            document TEXT NOT NULL)""",
        "CREATE TABLE IF NOT EXISTS gateway_admin_teams (name TEXT PRIMARY KEY, document TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS gateway_admin_audit (
            id {id},
            at {big} NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            before TEXT,
            after TEXT)""",
        "CREATE TABLE IF NOT EXISTS gateway_admin_state (id INTEGER PRIMARY KEY, version {big} NOT NULL)",
        "INSERT INTO gateway_admin_state (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
    ],
}
SCHEMA_VERSION = max(MIGRATIONS)

Statement = tuple[str, Sequence[Any]]


class SqlAdminStore(ABC):
    """The admin tables, with statements written with `?` placeholders (`_sql` turns them into the database's)."""

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    @abstractmethod
    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]: ...

    @abstractmethod
    async def _transaction(self, statements: list[Statement]) -> None:
        """Run the statements in one transaction; raise `AdminConflict` when a unique key refuses one."""

    @abstractmethod
    def _json_text(self, field: str) -> str:
        """The SQL expression of the record's top-level text field `field` (its JSON column is `record`)."""

    @abstractmethod
    def _json_cost(self) -> str:
        """The SQL expression of the record's `usage.cost.total` as a number."""

    async def team_spend(self, team: str, since_ms: int) -> float:
        """What the team's keys spent in the turns settled since `since_ms` (rebuilds a team's spend counter)."""
        rows = await self._fetch(
            f"SELECT COALESCE(SUM({self._json_cost()}), 0) FROM gateway_requests "
            f"WHERE created_at >= ? AND outcome IS NOT NULL AND {self._json_text('team')} = ?",
            (since_ms, team),
        )
        return float(rows[0][0] or 0) if rows else 0.0

    async def user_spend(self, key: str, user: str, since_ms: int) -> float:
        """What the key's turns for the end user `user` spent since `since_ms` (rebuilds an end user's spend)."""
        rows = await self._fetch(
            f"SELECT COALESCE(SUM({self._json_cost()}), 0) FROM gateway_requests "
            f"WHERE api_key_id = ? AND created_at >= ? AND outcome IS NOT NULL AND {self._json_text('user')} = ?",
            (key, since_ms, user),
        )
        return float(rows[0][0] or 0) if rows else 0.0

    async def version(self) -> int:
        rows = await self._fetch("SELECT version FROM gateway_admin_state WHERE id = 1")
        return int(rows[0][0]) if rows else 0

    async def keys(self) -> list[StoredKey]:
        rows = await self._fetch(
            "SELECT name, digest, previous_digest, previous_until, document FROM gateway_admin_keys ORDER BY name"
        )
        return [StoredKey(r[0], r[1], r[2], None if r[3] is None else int(r[3]), orjson.loads(r[4])) for r in rows]

    async def key(self, name: str) -> StoredKey | None:
        return next((key for key in await self.keys() if key.name == name), None)

    async def teams(self) -> list[dict[str, Any]]:
        rows = await self._fetch("SELECT document FROM gateway_admin_teams ORDER BY name")
        return [orjson.loads(row[0]) for row in rows]

    async def team(self, name: str) -> dict[str, Any] | None:
        rows = await self._fetch("SELECT document FROM gateway_admin_teams WHERE name = ?", (name,))
        return orjson.loads(rows[0][0]) if rows else None

    async def commit(self, writes: Sequence[KeyWrite | TeamWrite], audit: AuditEntry) -> None:
        """The writes, the audit entry and the version bump, in one transaction."""
        statements: list[Statement] = []
        for write in writes:
            if isinstance(write, KeyWrite):
                statements.extend(_key_statements(write))
            else:
                statements.extend(_team_statements(write))
        statements.append(
            (
                "INSERT INTO gateway_admin_audit (at, actor, action, target, before, after) VALUES (?, ?, ?, ?, ?, ?)",
                (audit.at_ms, audit.actor, audit.action, audit.target, _json(audit.before), _json(audit.after)),
            )
        )
        statements.append(("UPDATE gateway_admin_state SET version = version + 1 WHERE id = 1", ()))
        await self._transaction(statements)

    async def audit(self, limit: int, before_id: int | None = None) -> list[dict[str, Any]]:
        """The newest audit entries (before the entry `before_id`), newest first."""
        where, params = ("WHERE id < ?", (before_id, limit)) if before_id is not None else ("", (limit,))
        rows = await self._fetch(
            f"SELECT id, at, actor, action, target, before, after FROM gateway_admin_audit {where} "
            "ORDER BY id DESC LIMIT ?",
            params,
        )
        return [
            {
                "id": int(r[0]),
                "at": int(r[1]),
                "actor": r[2],
                "action": r[3],
                "target": r[4],
                "before": None if r[5] is None else orjson.loads(r[5]),
                "after": None if r[6] is None else orjson.loads(r[6]),
            }
            for r in rows
        ]

    async def records(
        self, from_ms: int, to_ms: int, api_key_id: str | None = None, session: str | None = None
    ) -> list[dict[str, Any]]:
        """The settled request records created in [from_ms, to_ms), oldest first; of one key or one session."""
        sql = (
            "SELECT record, outcome, settled_at FROM gateway_requests "
            "WHERE created_at >= ? AND created_at < ? AND outcome IS NOT NULL"
        )
        params: list[Any] = [from_ms, to_ms]
        if api_key_id is not None:
            sql += " AND api_key_id = ?"
            params.append(api_key_id)
        if session is not None:
            sql += f" AND {self._json_text('session')} = ?"
            params.append(session)
        rows = await self._fetch(sql + " ORDER BY created_at, request_id", params)
        return [decode_row(*row) for row in rows]


def _key_statements(write: KeyWrite) -> list[Statement]:
    key = write.key
    if key is None:
        return [("DELETE FROM gateway_admin_keys WHERE name = ?", (write.name,))]
    values = (key.name, key.digest, key.previous_digest, key.previous_until_ms, _json(key.document))
    insert = (
        "INSERT INTO gateway_admin_keys (name, digest, previous_digest, previous_until, document) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    if write.create:
        return [(insert, values)]
    statements: list[Statement] = []
    if write.name != key.name:  # a rename
        statements.append(("DELETE FROM gateway_admin_keys WHERE name = ?", (write.name,)))
        return [*statements, (insert, values)]
    upsert = (
        f"{insert} ON CONFLICT (name) DO UPDATE SET digest = excluded.digest, "
        "previous_digest = excluded.previous_digest, previous_until = excluded.previous_until, "
        "document = excluded.document"
    )
    return [(upsert, values)]


def _team_statements(write: TeamWrite) -> list[Statement]:
    if write.document is None:
        return [("DELETE FROM gateway_admin_teams WHERE name = ?", (write.name,))]
    insert = "INSERT INTO gateway_admin_teams (name, document) VALUES (?, ?)"
    values = (write.name, _json(write.document))
    if write.create:
        return [(insert, values)]
    return [(f"{insert} ON CONFLICT (name) DO UPDATE SET document = excluded.document", values)]


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def open_admin_store(url: str) -> SqlAdminStore:
    """The admin store on the ledger's database URL. Does no I/O; call `await store.start()`."""
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        from app.admin.sqlite_store import SqliteAdminStore

        return SqliteAdminStore(url)
    if scheme in ("postgresql", "postgres"):
        from app.admin.postgres_store import PostgresAdminStore

        return PostgresAdminStore(url)
    raise LedgerUrlError(f"unsupported scheme {scheme!r}")
