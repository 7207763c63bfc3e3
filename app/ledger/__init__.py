"""The request ledger: `open_ledger(url)` picks the store; `LedgerObserver` records every turn into it.

The observer is a `TurnObserver` of the dispatcher: a settled record's times and attempts come from the turn's
`SettledTurn` (`app.core.settled`), its `resumed` from the resume hub's count. Its callbacks only append to an
in-memory queue; one background writer task drains the queue in batches (an insert and a completion of the same
request in one batch become one row write), so no database work ever runs between two frames of a stream. Each
write is encoded when it is queued, so the queue never keeps a turn or its request context. When the store is down
the writer retries the batch with backoff and new writes wait in the queue, up to
`GATEWAY_LEDGER_QUEUE_BYTES` (what happens beyond is `LedgerObserver`'s docstring: dropped, counted and
logged, never blocking a stream).
Before a batch the writer waits up to `batch_delay` (`GATEWAY_LEDGER_BATCH_DELAY_MS`) for more writes, so
turns starting together share one transaction and the store's thread does not wake at every turn's start;
`flush()` (a records read, shutdown) and a full batch cut the wait short.
On shutdown `aclose()` flushes what is queued (up to `GATEWAY_LEDGER_FLUSH_TIMEOUT_S`) and closes the store.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import contextlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from app.core.job import TurnObserver
from app.ledger.base import Ledger, LedgerUrlError, StoredRow, WriteKind, build_record, encode_record

if TYPE_CHECKING:
    from app.core.job import TurnJob
    from app.core.settled import SettledTurn
    from app.settings import Settings

log = logging.getLogger("gateway.ledger")
_ENTRY_OVERHEAD = 512  # bytes counted per queued write besides its strings (the row and entry objects)
_DROP_LOG_INTERVAL_S = 10.0


class LedgerMetrics(Protocol):
    """What the recorder reports to metrics (`app.telemetry.metrics.Metrics`)."""

    def ledger_queue(self, queued_bytes: int) -> None: ...

    def ledger_write_dropped(self, kind: str) -> None: ...


__all__ = ["Ledger", "LedgerObserver", "LedgerUrlError", "build_record", "open_ledger"]


def open_ledger(url: str, settings: "Settings | None" = None) -> Ledger:
    """The store for a `GATEWAY_DATABASE_URL`. Does no I/O; call `await ledger.start()`."""
    scheme = url.partition(":")[0].lower()
    if scheme == "sqlite":
        from app.ledger.sqlite import SqliteLedger

        if settings is None:
            return SqliteLedger(url)
        return SqliteLedger(url, heartbeat_s=settings.ledger_heartbeat_s, stale_s=settings.ledger_instance_stale_s)
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
    raise LedgerUrlError(f"unsupported scheme {scheme!r}")


@dataclass(slots=True, eq=False)  # `pending.remove(entry)` compares by identity, not field by field (2 % of a turn)
class PendingWrite:
    """One queued record write: the encoded row and the memory it is counted for in the queue's bound."""

    seq: int  # queue order: 1, 2, 3 …
    kind: WriteKind
    row: StoredRow
    size: int


def pending_size(row: StoredRow) -> int:
    """What a queued row keeps in memory: its JSON text, its other columns, and a fixed allowance for the
    objects around them."""
    return sys.getsizeof(row.record) + len(row.request_id) + len(row.api_key_id or "") + _ENTRY_OVERHEAD


class LedgerObserver(TurnObserver):
    """Writes a record when a turn starts and completes it when the turn finishes, off the stream's path.

    The queue holds encoded rows (never the turn or its request context) and is bounded by their size,
    `queue_bytes`, counting the batch being written. When a write does not fit:

    - an insert is dropped: the record appears when its completion is written;
    - a completion replaces its own insert if that is still queued, in the insert's place in the queue (a
      flush that waits for the insert, a client reading its record after the terminal event while the turn
      is in its late-frame grace, then waits for the completion); if it still does not fit, it is queued
      without the message (as with `GATEWAY_RETAIN_CONTENT=false`), counted as a `content` drop;
    - if even that does not fit, it is dropped together with its queued insert, so the store never keeps an
      open record for a turn whose completion was dropped while its insert waited;
    - but the completion of a turn whose insert is already written (or in the batch being written) is always
      queued, without the message if need be, past the bound: its record is open in the store, and only the
      completion closes it. This exceeds the bound by at most one message-less row per open turn.

    Every drop bumps `dropped`, the `gateway_ledger_writes_dropped_total{kind}` metric, and logs a warning
    naming the request (at most one line per `_DROP_LOG_INTERVAL_S`, with the count since the last one).
    A single write larger than the whole bound is accepted when the queue is empty.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        retain_content: bool = True,
        queue_bytes: int = 64 * 1024 * 1024,
        batch_max: int = 500,
        batch_delay: float = 0.0,
        flush_timeout: float = 10.0,
        metrics: "LedgerMetrics | None" = None,
        times_resumed: "Callable[[TurnJob], int] | None" = None,
    ) -> None:
        self.ledger = ledger
        self.times_resumed = times_resumed  # how many times a turn was resumed (`app.resume.ResumeHub`)
        self.retain_content = retain_content
        self.queue_bytes = queue_bytes
        self.batch_max = batch_max
        self.batch_delay = batch_delay
        self.flush_timeout = flush_timeout
        self.metrics = metrics
        self.dropped = 0
        self.write_failures = 0
        self.queued_bytes = 0  # sizes of the queued writes plus the batch being written
        self.pending: deque[PendingWrite] = deque()  # in `seq` order
        self._in_flight: list[PendingWrite] = []  # the batch being written (older than everything pending)
        self._open: set[str] = set()  # turns whose insert is written or being written, not yet completed
        self._wakeup = asyncio.Event()
        self._hurry = asyncio.Event()  # set: write the next batch without waiting for `batch_delay`
        self._enqueued = 0  # seq of the last queued write
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task | None = None
        self._drops_unlogged = 0
        self._drop_logged_at = float("-inf")

    @classmethod
    def from_settings(
        cls,
        ledger: Ledger,
        settings: "Settings",
        metrics: "LedgerMetrics | None" = None,
        times_resumed: "Callable[[TurnJob], int] | None" = None,
    ) -> "LedgerObserver":
        return cls(
            ledger,
            retain_content=settings.retain_content,
            queue_bytes=settings.ledger_queue_bytes,
            batch_max=settings.ledger_batch_max,
            batch_delay=settings.ledger_batch_delay_ms / 1000,
            flush_timeout=settings.ledger_flush_timeout_s,
            metrics=metrics,
            times_resumed=times_resumed,
        )

    # ------------------------------------------------------------------ TurnObserver (event loop, no I/O)

    def turn_started(self, job: "TurnJob") -> None:
        row = self._encode(job, None, self.retain_content)
        if row is not None and not self._admit("insert", row):
            self._drop("insert", row.request_id)

    def turn_finished(self, job: "TurnJob", settled: "SettledTurn") -> None:
        request_id = job.turn.request_id
        opened = request_id in self._open  # its record is (being) written open: the completion must follow
        self._open.discard(request_id)
        row = self._encode(job, settled, self.retain_content)
        if row is None:
            return
        queued_insert = self._queued_insert(request_id)  # the completion supersedes it
        if self._admit("complete", row, replacing=queued_insert):
            return
        compact = self._encode(job, settled, False) if self.retain_content else row
        if compact is not None and self._admit("complete", compact, over_bound=opened, replacing=queued_insert):
            if compact is not row:
                self._drop("content", request_id)
            return
        if queued_insert is not None:
            self._remove(queued_insert)
        self._drop("complete", request_id)

    def resumed_late(self, job: "TurnJob") -> None:
        """The resume hub counted resumptions after the turn's record was completed: write it again with them.
        (Before the turn finished, its completion will count them.)"""
        if job.settled is not None:
            self.turn_finished(job, job.settled)

    def _encode(self, job: "TurnJob", settled: "SettledTurn | None", retain_content: bool) -> StoredRow | None:
        """The row now (open without a settled record): the turn's message dict is live, and the queue must not
        keep the job."""
        try:
            resumed = self.times_resumed(job) if settled is not None and self.times_resumed is not None else 0
            record = build_record(job, settled=settled, retain_content=retain_content, resumed=resumed)
            return encode_record(record, self.ledger.instance_id)
        except Exception:  # a bug of ours: lose this record, never the turn
            log.exception("could not build the record of %s", job.turn.request_id)
            return None

    def _admit(
        self, kind: WriteKind, row: StoredRow, over_bound: bool = False, replacing: PendingWrite | None = None
    ) -> bool:
        """Queue `row` if it fits the bound (or `over_bound`: the completion of a record written open).

        With `replacing` (a queued write), `row` takes that write's place and sequence number in the queue."""
        size = pending_size(row)
        others = self.queued_bytes - (replacing.size if replacing is not None else 0)
        if not over_bound and others and others + size > self.queue_bytes:
            return False
        if replacing is not None:
            replacing.kind, replacing.row, replacing.size = kind, row, size
            self.queued_bytes = others + size
            self._queue_changed()
            return True
        self._enqueued += 1
        self.pending.append(PendingWrite(self._enqueued, kind, row, size))
        self.queued_bytes += size
        self._queue_changed()
        self._wakeup.set()
        if len(self.pending) >= self.batch_max:
            self._hurry.set()
        return True

    def _queued_insert(self, request_id: str) -> PendingWrite | None:
        # Newest first: a turn's insert was queued when it started, usually not long ago.
        for entry in reversed(self.pending):
            if entry.row.request_id == request_id and entry.kind == "insert":
                return entry
        return None

    def _remove(self, entry: PendingWrite) -> None:
        """Take a queued (not yet popped) write out; it no longer holds up a flush."""
        self.pending.remove(entry)
        self.queued_bytes -= entry.size
        self._queue_changed()
        self._wake_flushers()

    def _drop(self, kind: str, request_id: str) -> None:
        self.dropped += 1
        if self.metrics is not None:
            self.metrics.ledger_write_dropped(kind)
        self._drops_unlogged += 1
        now = time.monotonic()
        if now - self._drop_logged_at >= _DROP_LOG_INTERVAL_S:
            log.warning(
                "ledger queue full (GATEWAY_LEDGER_QUEUE_BYTES=%d, %d bytes waiting for the store): dropped the %s "
                "write of request %s (%d writes dropped since the last such line)",
                self.queue_bytes,
                self.queued_bytes,
                kind,
                request_id,
                self._drops_unlogged,
                extra={"requestId": request_id, "droppedKind": kind, "droppedSinceLastLine": self._drops_unlogged},
            )
            self._drops_unlogged = 0
            self._drop_logged_at = now

    def _queue_changed(self) -> None:
        if self.metrics is not None:
            self.metrics.ledger_queue(self.queued_bytes)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the store (connect, migrate, heartbeat; nothing destructive) and the writer task."""
        await self.ledger.start()
        self._task = asyncio.create_task(self._writer(), name="ledger-writer")

    async def recover(self) -> int:
        """Once this process serves: mark the records of gateway processes that are gone `interrupted`."""
        return await self.ledger.recover()

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call is written. False on timeout."""
        target = self._enqueued
        if self._settled_through() >= target:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        self._hurry.set()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(future)
            return True
        except (TimeoutError, asyncio.TimeoutError):
            return False
        finally:
            self._waiters = [(t, f) for t, f in self._waiters if f is not future]

    async def aclose(self) -> None:
        """Flush what is queued (bounded by the flush timeout), stop the writer, close the store."""
        if self._task is not None:
            if not await self.flush(self.flush_timeout):
                log.warning(
                    "ledger: %d record writes not flushed at shutdown", len(self.pending) + len(self._in_flight)
                )
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.ledger.aclose()

    # ------------------------------------------------------------------ the writer

    async def _writer(self) -> None:
        while True:
            while not self.pending:
                self._wakeup.clear()
                await self._wakeup.wait()
            await self._gather()
            count = min(len(self.pending), self.batch_max)
            batch = self._in_flight = [self.pending.popleft() for _ in range(count)]
            self._open.update(entry.row.request_id for entry in batch if entry.kind == "insert")
            items = [(entry.kind, entry.row) for entry in batch]
            delay = 0.1
            while True:
                try:
                    await self.ledger.write(items)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.write_failures += 1
                    log.warning("ledger write of %d records failed (%s); retrying", len(items), type(exc).__name__)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            self._in_flight = []
            self.queued_bytes -= sum(entry.size for entry in batch)
            self._queue_changed()
            self._wake_flushers()

    async def _gather(self) -> None:
        """Let writes gather for `batch_delay` unless someone waits for them or a batch is full."""
        if self.batch_delay > 0 and not self._hurry.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.batch_delay):
                    await self._hurry.wait()
        self._hurry.clear()

    def _settled_through(self) -> int:
        """Every write with a seq up to this one is written or removed."""
        oldest = self._in_flight or self.pending
        return oldest[0].seq - 1 if oldest else self._enqueued

    def _wake_flushers(self) -> None:
        settled = self._settled_through()
        for target, future in self._waiters:
            if target <= settled and not future.done():
                future.set_result(None)
