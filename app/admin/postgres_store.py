"""The admin tables in the ledger's PostgreSQL database (`app.admin.store`): a small asyncpg pool of their own;
replicas starting together migrate once (an advisory lock around the DDL, as the ledger does)."""

from __future__ import annotations

import re
from typing import Any, Sequence

import asyncpg

from app.admin.store import MIGRATIONS, SCHEMA_VERSION, AdminConflict, SqlAdminStore, Statement

MIGRATION_LOCK = 0x6C6C6D67_61646D6E & 0x7FFFFFFFFFFFFFFF  # "llmgadmn"
_TYPES = {"id": "BIGSERIAL PRIMARY KEY", "big": "BIGINT"}
_PLACEHOLDER = re.compile(r"\?")


def _numbered(sql: str) -> str:
    """`?` placeholders as PostgreSQL's `$1`, `$2`, …"""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


class PostgresAdminStore(SqlAdminStore):
    def __init__(self, url: str, pool_size: int = 2) -> None:
        self._url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        self._pool = await asyncpg.create_pool(self._url, min_size=1, max_size=self._pool_size)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS gateway_admin_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"
            )
            current = await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM gateway_admin_schema")
            for version in range(int(current) + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    await conn.execute(statement.format(**_TYPES))
                await conn.execute(
                    "INSERT INTO gateway_admin_schema VALUES ($1, (extract(epoch from now()) * 1000)::bigint)", version
                )

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        rows = await self._require().fetch(_numbered(sql), *params)
        return [tuple(row) for row in rows]

    async def _transaction(self, statements: list[Statement]) -> None:
        async with self._require().acquire() as conn:
            try:
                async with conn.transaction():
                    for sql, params in statements:
                        await conn.execute(_numbered(sql), *params)
            except asyncpg.UniqueViolationError as exc:
                raise AdminConflict(str(exc)) from None

    def _json_cost(self) -> str:
        return "((record::jsonb) -> 'usage' -> 'cost' ->> 'total')::float8"

    def _json_text(self, field: str) -> str:
        return f"((record::jsonb) ->> '{field}')"

    def _require(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the admin store is not started")
        return self._pool
