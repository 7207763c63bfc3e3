"""The request ledger: `open_ledger(url)` picks the store; `LedgerObserver` records every turn into it.

The observer is a `TurnObserver` of the dispatcher. Its callbacks only append to an in-memory queue; one
background writer task drains the queue in batches (an insert and a completion of the same request in one
batch become one row write), so no database work ever runs between two frames of a stream. When the store
is down the writer retries the batch with backoff and new records wait in the queue, up to
`GATEWAY_LEDGER_QUEUE_MAX` entries (beyond that they are dropped and logged, never blocking a stream).
On shutdown `aclose()` flushes what is queued (up to `GATEWAY_LEDGER_FLUSH_TIMEOUT_S`) and closes the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING

from app.ledger.base import Ledger, StoredRow, WriteKind, build_record, encode_record, now_ms

if TYPE_CHECKING:
    from app.dispatch import TurnJob
    from app.settings import Settings

log = logging.getLogger("gateway.ledger")
_YIELD_EVERY_BYTES = 256 * 1024  # the writer yields to the event loop after encoding this much

__all__ = ["Ledger", "LedgerObserver", "build_record", "open_ledger"]


def open_ledger(url: str, settings: "Settings | None" = None) -> Ledger:
    """The store for a `GATEWAY_DATABASE_URL`. Does no I/O; call `await ledger.start()`."""
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        from app.ledger.sqlite import SqliteLedger

        return SqliteLedger(url)
    if scheme in ("postgresql", "postgres"):
        from app.ledger.postgres import PostgresLedger

        if settings is None:
            return PostgresLedger(url)
        return PostgresLedger(
            url,
            pool_size=settings.ledger_pool_size,
            heartbeat_s=settings.ledger_heartbeat_s,
            stale_s=settings.ledger_instance_stale_s,
        )
    # Never echo the URL: it may hold a password.
    raise ValueError(f"GATEWAY_DATABASE_URL: unsupported scheme {scheme!r} (use sqlite:/// or postgresql://)")


class LedgerObserver:
    """Writes a record when a turn starts and completes it when the turn finishes, off the stream's path."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        retain_content: bool = True,
        queue_max: int = 100_000,
        batch_max: int = 500,
        flush_timeout: float = 10.0,
    ) -> None:
        self.ledger = ledger
        self.retain_content = retain_content
        self.queue_max = queue_max
        self.batch_max = batch_max
        self.flush_timeout = flush_timeout
        self.dropped = 0
        self.write_failures = 0
        self._queue: deque[tuple[WriteKind, "TurnJob", int | None]] = deque()
        self._wakeup = asyncio.Event()
        self._enqueued = 0  # sequence number of the last queued entry
        self._done = 0  # entries written (or dropped), in order
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task | None = None

    @classmethod
    def from_settings(cls, ledger: Ledger, settings: "Settings") -> "LedgerObserver":
        return cls(
            ledger,
            retain_content=settings.retain_content,
            queue_max=settings.ledger_queue_max,
            batch_max=settings.ledger_batch_max,
            flush_timeout=settings.ledger_flush_timeout_s,
        )

    # ------------------------------------------------------------------ TurnObserver (event loop, no I/O)

    def turn_started(self, job: "TurnJob") -> None:
        self._put("insert", job, None)

    def turn_finished(self, job: "TurnJob") -> None:
        self._put("complete", job, now_ms())

    def _put(self, kind: WriteKind, job: "TurnJob", settled_at: int | None) -> None:
        self._enqueued += 1
        if len(self._queue) >= self.queue_max:
            self.dropped += 1
            self._done += 1
            log.warning("ledger queue full: dropped the %s of request %s", kind, job.turn.request_id)
            return
        self._queue.append((kind, job, settled_at))
        self._wakeup.set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the store (migrate, mark interrupted records) and the writer task."""
        marked = await self.ledger.start()
        if marked:
            log.info("ledger: %d records left open by a stopped gateway marked interrupted", marked)
        self._task = asyncio.create_task(self._writer(), name="ledger-writer")

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call is written. False on timeout."""
        target = self._enqueued
        if self._done >= target:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except (TimeoutError, asyncio.TimeoutError):
            return False
        finally:
            self._waiters = [(t, f) for t, f in self._waiters if f is not future]

    async def aclose(self) -> None:
        """Flush what is queued (bounded by the flush timeout), stop the writer, close the store."""
        if self._task is not None:
            if not await self.flush(self.flush_timeout):
                log.warning("ledger: %d record writes not flushed at shutdown", len(self._queue))
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.ledger.aclose()

    # ------------------------------------------------------------------ the writer

    async def _writer(self) -> None:
        while True:
            while not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            count = min(len(self._queue), self.batch_max)
            entries = [self._queue.popleft() for _ in range(count)]
            items: list[tuple[WriteKind, StoredRow]] = []
            encoded = 0
            for kind, job, settled_at in entries:
                try:
                    record = build_record(job, settled_at=settled_at, retain_content=self.retain_content)
                    row = encode_record(record, self.ledger.instance_id)  # now: the message dict is live
                except Exception:  # a bug of ours: lose this record, never the writer
                    log.exception("could not build the record of %s", job.turn.request_id)
                    continue
                items.append((kind, row))
                encoded += len(row.record)
                if encoded > _YIELD_EVERY_BYTES:  # let streams run between big records
                    encoded = 0
                    await asyncio.sleep(0)
            delay = 0.1
            while True:
                try:
                    if items:
                        await self.ledger.write(items)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.write_failures += 1
                    log.warning("ledger write of %d records failed (%s); retrying", len(items), type(exc).__name__)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            self._done += count
            self._wake_flushers()

    def _wake_flushers(self) -> None:
        for target, future in self._waiters:
            if target <= self._done and not future.done():
                future.set_result(None)
