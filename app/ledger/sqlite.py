"""The embedded ledger: one SQLite file (WAL), for a single gateway replica.

`sqlite:///./data/gateway.db` is the relative file `./data/gateway.db`, `sqlite:////var/lib/gw.db` the
absolute `/var/lib/gw.db`, `sqlite:///:memory:` an in-memory database (tests). The file's directory is
created. Writes go through one connection, reads through a second one, so a reader never waits for a write
batch (WAL lets both run).

Several processes may share the file (a second `make run`, `GATEWAY_WORKERS=2`; WAL needs them on one
host). Which open records are `interrupted` follows the liveness rule of `app.ledger.liveness`, with the
heartbeats in `gateway_instances` as epoch milliseconds of this host's clock, so a starting process never
marks a live one's turns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, Sequence

import aiosqlite

from app.ledger.base import (
    COLUMN_COUNT,
    COLUMNS,
    UPSERT_SET,
    Ledger,
    LedgerUrlError,
    StoredRow,
    WriteKind,
    decode_row,
    new_instance_id,
    now_ms,
)
from app.ledger.liveness import InstanceRow, dead_instances, heartbeat_forever, host_identity, log_marked

log = logging.getLogger("gateway.ledger")

SCHEMA_VERSION = 5
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS gateway_requests (
            request_id TEXT PRIMARY KEY,
            api_key_id TEXT,
            instance_id TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            settled_at INTEGER,
            outcome TEXT,
            record TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS gateway_requests_key_created "
        "ON gateway_requests (api_key_id, created_at DESC, request_id DESC)",
        "CREATE INDEX IF NOT EXISTS gateway_requests_created ON gateway_requests (created_at DESC, request_id DESC)",
        "CREATE INDEX IF NOT EXISTS gateway_requests_open ON gateway_requests (instance_id) WHERE outcome IS NULL",
    ],
    # The door (client wire format) a request came through: a door's name (`DOORS`, app/doors/registry.py).
    2: ["ALTER TABLE gateway_requests ADD COLUMN door TEXT"],
    # Instance heartbeats (app/ledger/liveness.py).
    3: [
        """CREATE TABLE IF NOT EXISTS gateway_instances (
            instance_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_at INTEGER NOT NULL,
            heartbeat_at INTEGER NOT NULL)""",
    ],
    # Stored responses of the OpenAI Responses door (`store: true`), see `Ledger.save_response`.
    4: [
        """CREATE TABLE IF NOT EXISTS gateway_responses (
            response_id TEXT PRIMARY KEY,
            api_key_id TEXT,
            created_at INTEGER NOT NULL,
            document TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS gateway_responses_created ON gateway_responses (created_at)",
    ],
    # A key's stored responses, newest first (`save_response`'s `keep_per_key`).
    5: ["CREATE INDEX IF NOT EXISTS gateway_responses_key ON gateway_responses (api_key_id, created_at)"],
}
_SELECT = "SELECT record, outcome, settled_at FROM gateway_requests"


def sqlite_path(url: str) -> str:
    """The file path of a `sqlite:///…` URL."""
    if not url.startswith("sqlite:///"):
        raise LedgerUrlError("a SQLite ledger URL looks like sqlite:///path/to/file.db")
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if not path:
        raise LedgerUrlError("the SQLite ledger URL names no file")
    return path


class SqliteLedger(Ledger):
    def __init__(self, url: str, *, heartbeat_s: float = 10.0, stale_s: float = 60.0) -> None:
        self.path = sqlite_path(url)
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.instance_id = new_instance_id()
        self.host = host_identity()
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._transaction = asyncio.Lock()  # one transaction at a time on the writer connection
        self._heartbeat: asyncio.Task | None = None
        self._recovering = False  # set by `recover()`: from then on every heartbeat marks too

    async def _connect(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self.path, isolation_level=None)  # autocommit; transactions are explicit
        await db.execute("PRAGMA busy_timeout = 5000")
        return db

    async def start(self) -> None:
        memory = self.path == ":memory:"
        if not memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = await self._connect()
        if not memory:
            await _use_wal(self._writer)
            await self._writer.execute("PRAGMA synchronous = NORMAL")
        await self._migrate(self._writer)
        self._reader = self._writer if memory else await self._connect()
        await self._beat()
        self._heartbeat = asyncio.create_task(heartbeat_forever(self.heartbeat_s, self._tick), name="ledger-heartbeat")

    async def recover(self) -> int:
        self._recovering = True  # a failure here is retried on the next heartbeat
        marked = await self._mark_orphans()
        log_marked(marked)
        return marked

    async def _tick(self) -> None:
        await self._beat()
        if self._recovering:
            log_marked(await self._mark_orphans())

    async def _beat(self) -> None:
        db = self._require(self._writer)
        now = now_ms()
        async with self._transaction:
            await db.execute(
                "INSERT INTO gateway_instances (instance_id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
                (self.instance_id, self.host, os.getpid(), now, now),
            )

    async def _mark_orphans(self) -> int:
        db = self._require(self._writer)
        async with self._transaction:
            await db.execute("BEGIN IMMEDIATE")
            try:
                now = now_ms()
                async with db.execute(
                    "SELECT instance_id, host, pid, heartbeat_at < ? FROM gateway_instances WHERE instance_id <> ?",
                    (now - int(self.stale_s * 1000), self.instance_id),
                ) as cursor:
                    rows = [InstanceRow(r[0], r[1], r[2], bool(r[3])) for r in await cursor.fetchall()]
                dead = json.dumps(dead_instances(rows, self.host))
                cursor = await db.execute(
                    "UPDATE gateway_requests SET outcome = 'interrupted', settled_at = ? "
                    "WHERE outcome IS NULL AND instance_id <> ? AND (instance_id IN (SELECT value FROM json_each(?)) "
                    "OR instance_id NOT IN (SELECT instance_id FROM gateway_instances))",
                    (now, self.instance_id, dead),
                )
                marked = cursor.rowcount
                await db.execute(
                    "DELETE FROM gateway_instances WHERE instance_id IN (SELECT value FROM json_each(?))", (dead,)
                )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise
        return marked

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        await db.execute("BEGIN IMMEDIATE")
        try:
            await db.execute(
                "CREATE TABLE IF NOT EXISTS gateway_schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
            )
            async with db.execute("SELECT COALESCE(MAX(version), 0) FROM gateway_schema_version") as cursor:
                current = _only_value(await cursor.fetchone())
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    await db.execute(statement)
                await db.execute("INSERT INTO gateway_schema_version VALUES (?, ?)", (version, now_ms()))
            await db.execute("COMMIT")
        except BaseException:
            await db.execute("ROLLBACK")
            raise

    async def write(self, items: Sequence[tuple[WriteKind, "dict[str, Any] | StoredRow"]]) -> None:
        inserts, completes = self.encode(items)
        db = self._require(self._writer)
        placeholders = ", ".join("?" * COLUMN_COUNT)
        async with self._transaction:
            await db.execute("BEGIN")
            try:
                if inserts:
                    await db.executemany(
                        f"INSERT INTO gateway_requests ({COLUMNS}) VALUES ({placeholders}) ON CONFLICT (request_id) DO NOTHING",
                        inserts,
                    )
                if completes:
                    await db.executemany(
                        f"INSERT INTO gateway_requests ({COLUMNS}) VALUES ({placeholders}) "
                        f"ON CONFLICT (request_id) DO UPDATE SET {UPSERT_SET}",
                        completes,
                    )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise

    async def get(self, request_id: str, api_key_id: str | None) -> dict[str, Any] | None:
        db = self._require(self._reader)
        params: tuple[str, ...]
        if api_key_id is None:
            query, params = f"{_SELECT} WHERE request_id = ?", (request_id,)
        else:
            query, params = f"{_SELECT} WHERE request_id = ? AND api_key_id = ?", (request_id, api_key_id)
        async with db.execute(query, params) as cursor:
            row = await cursor.fetchone()
        return decode_row(*row) if row else None

    async def list(self, api_key_id: str | None, limit: int) -> list[dict[str, Any]]:
        db = self._require(self._reader)
        order = "ORDER BY created_at DESC, request_id DESC LIMIT ?"
        params: tuple[str | int, ...]
        if api_key_id is None:
            query, params = f"{_SELECT} {order}", (limit,)
        else:
            query, params = f"{_SELECT} WHERE api_key_id = ? {order}", (api_key_id, limit)
        async with db.execute(query, params) as cursor:
            rows = await cursor.fetchall()
        return [decode_row(*row) for row in rows]

    async def spend(self, api_key_id: str, since_ms: int) -> float:
        query = (
            "SELECT COALESCE(SUM(json_extract(record, '$.usage.cost.total')), 0) FROM gateway_requests "
            "WHERE api_key_id = ? AND created_at >= ? AND outcome IS NOT NULL"
        )
        async with self._require(self._reader).execute(query, (api_key_id, since_ms)) as cursor:
            return float(_only_value(await cursor.fetchone()) or 0)

    async def last_cost(self, api_key_id: str) -> float:
        query = (
            "SELECT json_extract(record, '$.usage.cost.total') FROM gateway_requests "
            "WHERE api_key_id = ? AND outcome IS NOT NULL ORDER BY created_at DESC LIMIT 1"
        )
        async with self._require(self._reader).execute(query, (api_key_id,)) as cursor:
            row = await cursor.fetchone()
            return float(row[0] or 0) if row else 0.0

    async def save_response(
        self,
        response_id: str,
        api_key_id: str | None,
        created_at: int,
        document: str,
        *,
        expired_before: int,
        keep_per_key: int | None = None,
    ) -> None:
        db = self._require(self._writer)
        async with self._transaction:
            await db.execute("BEGIN")
            try:
                await db.execute("DELETE FROM gateway_responses WHERE created_at < ?", (expired_before,))
                await db.execute(
                    "INSERT INTO gateway_responses (response_id, api_key_id, created_at, document) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (response_id) DO UPDATE SET api_key_id = excluded.api_key_id, "
                    "created_at = excluded.created_at, document = excluded.document",
                    (response_id, api_key_id, created_at, document),
                )
                if keep_per_key is not None:
                    await db.execute(
                        "DELETE FROM gateway_responses WHERE response_id IN (SELECT response_id FROM gateway_responses "
                        "WHERE api_key_id IS ? ORDER BY created_at DESC, response_id DESC LIMIT -1 OFFSET ?)",
                        (api_key_id, keep_per_key),
                    )
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise

    async def load_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> str | None:
        query = "SELECT document FROM gateway_responses WHERE response_id = ? AND api_key_id IS ? AND created_at >= ?"
        async with self._require(self._reader).execute(query, (response_id, api_key_id, since_ms)) as cursor:
            row = await cursor.fetchone()
        return row[0] if row else None

    async def delete_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> bool:
        db = self._require(self._writer)
        async with self._transaction:
            cursor = await db.execute(
                "DELETE FROM gateway_responses WHERE response_id = ? AND api_key_id IS ? AND created_at >= ?",
                (response_id, api_key_id, since_ms),
            )
            return cursor.rowcount > 0

    async def ping(self) -> None:
        async with self._require(self._reader).execute("SELECT 1") as cursor:
            await cursor.fetchone()

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        if self._writer is not None:
            try:
                # A clean stop: no heartbeat row, so anything of ours still open counts as interrupted (rule 2).
                async with self._transaction:
                    await self._writer.execute(
                        "DELETE FROM gateway_instances WHERE instance_id = ?", (self.instance_id,)
                    )
            except Exception as exc:
                log.warning("could not remove this instance's heartbeat row: %s", type(exc).__name__)
        for db in {id(c): c for c in (self._reader, self._writer) if c is not None}.values():
            await db.close()
        self._reader = self._writer = None

    @staticmethod
    def _require(db: aiosqlite.Connection | None) -> aiosqlite.Connection:
        if db is None:
            raise RuntimeError("the ledger is not started")
        return db


def _only_value(row: aiosqlite.Row | None) -> Any:
    """The value of the one row that an aggregate or a PRAGMA always answers."""
    if row is None:
        raise RuntimeError("SQLite answered no row where one is always answered")
    return row[0]


async def _use_wal(db: aiosqlite.Connection) -> None:
    """Switch the file to WAL (it stays so). Switching takes an exclusive lock and SQLite answers "locked" at once,
    without its busy timeout, when another process opens the file at the same moment: wait and look again."""
    for attempt in range(40):
        async with db.execute("PRAGMA journal_mode") as cursor:
            if str(_only_value(await cursor.fetchone())).lower() == "wal":
                return
        try:
            await db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 39:
                raise
            await asyncio.sleep(0.025 * (attempt + 1))
