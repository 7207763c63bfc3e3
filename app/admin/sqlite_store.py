"""The admin tables in the ledger's SQLite file (`app.admin.store`): one connection of their own, WAL as the
ledger set it, every change in one `BEGIN IMMEDIATE` transaction (several processes may share the file)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Sequence

import aiosqlite

from app.admin.store import MIGRATIONS, SCHEMA_VERSION, AdminConflict, SqlAdminStore, Statement
from app.ledger.base import now_ms
from app.ledger.sqlite import sqlite_path

_TYPES = {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "big": "INTEGER"}


class SqliteAdminStore(SqlAdminStore):
    def __init__(self, url: str) -> None:
        self.path = sqlite_path(url)
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()  # one transaction at a time on the connection

    async def start(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        await self._db.execute("PRAGMA busy_timeout = 5000")
        await self._transaction(
            [
                (
                    "CREATE TABLE IF NOT EXISTS gateway_admin_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                    (),
                )
            ]
        )
        async with self._lock:
            db = self._require()
            await db.execute("BEGIN IMMEDIATE")
            try:
                async with db.execute("SELECT COALESCE(MAX(version), 0) FROM gateway_admin_schema") as cursor:
                    row = await cursor.fetchone()
                current = int(row[0]) if row else 0
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[version]:
                        await db.execute(statement.format(**_TYPES))
                    await db.execute("INSERT INTO gateway_admin_schema VALUES (?, ?)", (version, now_ms()))
                await db.execute("COMMIT")
            except BaseException:
                await db.execute("ROLLBACK")
                raise

    async def aclose(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Sequence[Any]]:
        async with self._require().execute(sql, tuple(params)) as cursor:
            return list(await cursor.fetchall())

    async def _transaction(self, statements: list[Statement]) -> None:
        async with self._lock:
            db = self._require()
            await db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    await db.execute(sql, tuple(params))
                await db.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                await db.execute("ROLLBACK")
                raise AdminConflict(str(exc)) from None
            except BaseException:
                await db.execute("ROLLBACK")
                raise

    def _json_cost(self) -> str:
        return "json_extract(record, '$.usage.cost.total')"

    def _json_text(self, field: str) -> str:
        return f"json_extract(record, '$.{field}')"

    def _require(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("the admin store is not started")
        return self._db
