"""The shared ledger: PostgreSQL through an asyncpg pool, for one or several gateway replicas.

`GATEWAY_DATABASE_URL=postgresql://user:pass@host:5432/db` (`postgres://` works too). Query parameters that
are not connection options are server settings, so `?search_path=gw` puts the tables in schema `gw`.

Migration. At start every replica takes `pg_advisory_xact_lock` inside one transaction, reads
`gateway_schema_version` and runs the missing (idempotent) DDL, so replicas starting together migrate once.

Which open records are `interrupted`: the liveness rule of `app.ledger.liveness` (instance heartbeats in
`gateway_instances`; times are the database server's `now()`, so hosts' clocks do not matter).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Sequence

import asyncpg

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

SCHEMA_VERSION = 4
MIGRATION_LOCK = 0x6C6C6D67_6C656467 & 0x7FFFFFFFFFFFFFFF  # "llmgledg": one advisory lock id for the DDL
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE IF NOT EXISTS gateway_requests (
            request_id TEXT PRIMARY KEY,
            api_key_id TEXT,
            instance_id TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            settled_at BIGINT,
            outcome TEXT,
            record TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS gateway_requests_key_created "
        "ON gateway_requests (api_key_id, created_at DESC, request_id DESC)",
        "CREATE INDEX IF NOT EXISTS gateway_requests_created ON gateway_requests (created_at DESC, request_id DESC)",
        "CREATE INDEX IF NOT EXISTS gateway_requests_open ON gateway_requests (instance_id) WHERE outcome IS NULL",
        """CREATE TABLE IF NOT EXISTS gateway_instances (
            instance_id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now())""",
    ],
    # The door (client wire format) a request came through: a door's name (`DOORS`, app/doors/registry.py).
    2: ["ALTER TABLE gateway_requests ADD COLUMN IF NOT EXISTS door TEXT"],
    # Stored responses of the OpenAI Responses door (`store: true`), see `Ledger.save_response`.
    3: [
        """CREATE TABLE IF NOT EXISTS gateway_responses (
            response_id TEXT PRIMARY KEY,
            api_key_id TEXT,
            created_at BIGINT NOT NULL,
            document TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS gateway_responses_created ON gateway_responses (created_at)",
    ],
    # A key's stored responses, newest first (`save_response`'s `keep_per_key`).
    4: ["CREATE INDEX IF NOT EXISTS gateway_responses_key ON gateway_responses (api_key_id, created_at)"],
}
_SELECT = "SELECT record, outcome, settled_at FROM gateway_requests"
_VALUES = "VALUES (" + ", ".join(f"${n}" for n in range(1, COLUMN_COUNT + 1)) + ")"


class PostgresLedger(Ledger):
    def __init__(self, url: str, *, pool_size: int = 10, heartbeat_s: float = 10.0, stale_s: float = 60.0) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise LedgerUrlError("a PostgreSQL ledger URL looks like postgresql://user@host:5432/db")
        self._url = url
        self._pool_size = pool_size
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.instance_id = new_instance_id()
        self.host = host_identity()
        self._pool: asyncpg.Pool | None = None
        self._heartbeat: asyncio.Task | None = None
        self._recovering = False  # set by `recover()`: from then on every heartbeat marks too

    async def start(self) -> None:
        self._pool = await asyncpg.create_pool(self._url, min_size=1, max_size=self._pool_size)
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS gateway_schema_version "
                    "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                current = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM gateway_schema_version")
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version]:
                        await conn.execute(statement)
                    await conn.execute("INSERT INTO gateway_schema_version (version) VALUES ($1)", version)
            await self._beat(conn)
        self._heartbeat = asyncio.create_task(heartbeat_forever(self.heartbeat_s, self._tick), name="ledger-heartbeat")

    async def recover(self) -> int:
        self._recovering = True  # a failure here is retried on the next heartbeat
        async with self._require().acquire() as conn:
            marked = await self._mark_orphans(conn)
        log_marked(marked)
        return marked

    async def _tick(self) -> None:
        async with self._require().acquire() as conn:
            await self._beat(conn)
            if self._recovering:
                log_marked(await self._mark_orphans(conn))

    async def _beat(self, conn: asyncpg.Connection) -> None:
        await conn.execute(
            "INSERT INTO gateway_instances (instance_id, host, pid) VALUES ($1, $2, $3) "
            "ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = now()",
            self.instance_id,
            self.host,
            os.getpid(),
        )

    async def _mark_orphans(self, conn: asyncpg.Connection) -> int:
        async with conn.transaction():
            rows = await conn.fetch(
                "SELECT instance_id, host, pid, heartbeat_at < now() - make_interval(secs => $2) AS stale "
                "FROM gateway_instances WHERE instance_id <> $1",
                self.instance_id,
                float(self.stale_s),
            )
            dead = dead_instances(
                (InstanceRow(r["instance_id"], r["host"], r["pid"], r["stale"]) for r in rows), self.host
            )
            status = await conn.execute(
                "UPDATE gateway_requests r SET outcome = 'interrupted', settled_at = $1 "
                "WHERE r.outcome IS NULL AND r.instance_id <> $2 AND (r.instance_id = ANY($3::text[]) OR NOT EXISTS "
                "(SELECT 1 FROM gateway_instances i WHERE i.instance_id = r.instance_id))",
                now_ms(),
                self.instance_id,
                dead,
            )
            if dead:
                await conn.execute("DELETE FROM gateway_instances WHERE instance_id = ANY($1::text[])", dead)
        return int(status.split()[-1])

    async def write(self, items: Sequence[tuple[WriteKind, "dict[str, Any] | StoredRow"]]) -> None:
        inserts, completes = self.encode(items)
        async with self._require().acquire() as conn:
            async with conn.transaction():
                if inserts:
                    await conn.executemany(
                        f"INSERT INTO gateway_requests ({COLUMNS}) {_VALUES} ON CONFLICT (request_id) DO NOTHING",
                        inserts,
                    )
                if completes:
                    await conn.executemany(
                        f"INSERT INTO gateway_requests ({COLUMNS}) {_VALUES} "
                        f"ON CONFLICT (request_id) DO UPDATE SET {UPSERT_SET}",
                        completes,
                    )

    async def get(self, request_id: str, api_key_id: str | None) -> dict[str, Any] | None:
        pool = self._require()
        if api_key_id is None:
            row = await pool.fetchrow(f"{_SELECT} WHERE request_id = $1", request_id)
        else:
            row = await pool.fetchrow(f"{_SELECT} WHERE request_id = $1 AND api_key_id = $2", request_id, api_key_id)
        return decode_row(row["record"], row["outcome"], row["settled_at"]) if row else None

    async def list(self, api_key_id: str | None, limit: int) -> list[dict[str, Any]]:
        pool = self._require()
        if api_key_id is None:
            rows = await pool.fetch(f"{_SELECT} ORDER BY created_at DESC, request_id DESC LIMIT $1", limit)
        else:
            rows = await pool.fetch(
                f"{_SELECT} WHERE api_key_id = $1 ORDER BY created_at DESC, request_id DESC LIMIT $2", api_key_id, limit
            )
        return [decode_row(r["record"], r["outcome"], r["settled_at"]) for r in rows]

    async def spend(self, api_key_id: str, since_ms: int) -> float:
        value = await self._require().fetchval(
            "SELECT COALESCE(SUM(((record::jsonb) -> 'usage' -> 'cost' ->> 'total')::float8), 0) FROM gateway_requests "
            "WHERE api_key_id = $1 AND created_at >= $2 AND outcome IS NOT NULL",
            api_key_id,
            since_ms,
        )
        return float(value or 0)

    async def last_cost(self, api_key_id: str) -> float:
        value = await self._require().fetchval(
            "SELECT ((record::jsonb) -> 'usage' -> 'cost' ->> 'total')::float8 FROM gateway_requests "
            "WHERE api_key_id = $1 AND outcome IS NOT NULL ORDER BY created_at DESC LIMIT 1",
            api_key_id,
        )
        return float(value or 0)

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
        async with self._require().acquire() as conn:
            async with conn.transaction():
                await conn.execute("DELETE FROM gateway_responses WHERE created_at < $1", expired_before)
                await conn.execute(
                    "INSERT INTO gateway_responses (response_id, api_key_id, created_at, document) VALUES ($1, $2, $3, $4) "
                    "ON CONFLICT (response_id) DO UPDATE SET api_key_id = excluded.api_key_id, "
                    "created_at = excluded.created_at, document = excluded.document",
                    response_id, api_key_id, created_at, document,
                )  # fmt: skip
                if keep_per_key is not None:
                    await conn.execute(
                        "DELETE FROM gateway_responses WHERE response_id IN (SELECT response_id FROM gateway_responses "
                        "WHERE api_key_id IS NOT DISTINCT FROM $1 ORDER BY created_at DESC, response_id DESC OFFSET $2)",
                        api_key_id, keep_per_key,
                    )  # fmt: skip

    async def load_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> str | None:
        return await self._require().fetchval(
            "SELECT document FROM gateway_responses "
            "WHERE response_id = $1 AND api_key_id IS NOT DISTINCT FROM $2 AND created_at >= $3",
            response_id, api_key_id, since_ms,
        )  # fmt: skip

    async def delete_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> bool:
        status = await self._require().execute(
            "DELETE FROM gateway_responses "
            "WHERE response_id = $1 AND api_key_id IS NOT DISTINCT FROM $2 AND created_at >= $3",
            response_id, api_key_id, since_ms,
        )  # fmt: skip
        return int(status.split()[-1]) > 0

    async def ping(self) -> None:
        await self._require().fetchval("SELECT 1")

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            # A clean stop: no heartbeat row, so anything of ours still open counts as interrupted (rule 2).
            await pool.execute("DELETE FROM gateway_instances WHERE instance_id = $1", self.instance_id)
        except Exception as exc:
            log.warning("could not remove this instance's heartbeat row: %s", type(exc).__name__)
        try:
            async with asyncio.timeout(10):
                await pool.close()
        except (TimeoutError, asyncio.TimeoutError):
            pool.terminate()

    def _require(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the ledger is not started")
        return self._pool
