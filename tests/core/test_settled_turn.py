"""A settled turn's record (`app.core.settled`) is built once, by the dispatcher, and every observer records
the same figures from it: metrics, the request log line, the ledger's record and the console's health window;
a door's view of the turn (`TurnJob.result`) is that same record. One turn each: retried, fallen back after a
timeout, aborted by its client, failed before any content."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from app.catalog import Catalog
from app.contract.failures import Interrupt
from app.core.dispatcher import Dispatcher
from app.core.job import TurnJob
from app.telemetry.health import HealthWindow
from app.ledger import LedgerObserver, open_ledger
from app.telemetry.logs import RequestLog
from app.telemetry.metrics import Metrics
from app.providers.base import ProviderError
from app.settings import Settings
from app.core.settled import AttemptStep, Cancellation, NextStep, SettledTurn
from tests.fake_provider import HANG, FakeProvider, Gate, new_job, text_frames

MODEL = "other"  # the empty catalog lists no model: metrics label every model `other`


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Observers:
    """Every observer that reads the settled record, on one dispatcher."""

    def __init__(self, tmp_path: Any, **settings: Any) -> None:
        self.metrics = Metrics(Catalog())
        self.lines = LogLines()
        logger = logging.getLogger(f"test.turn_summary.{id(self)}")
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(self.lines)
        self.log = RequestLog(logger=logger)
        self.window = HealthWindow()
        self.recorder = LedgerObserver(open_ledger(f"sqlite:///{tmp_path}/records.db"))  # not started: rows stay queued
        self.dispatcher = Dispatcher(
            {}, Catalog(), Settings(**{"retries": 1, "retry_backoff_ms": 1, "late_frame_grace": 0.05, **settings})
        )
        self.dispatcher.observers += [self.metrics, self.log, self.window, self.recorder]

    def start(self, job: TurnJob) -> None:
        job.turn.close_reader()  # like /v1/complete: nobody reads events
        self.dispatcher.start(job)

    async def run(self, job: TurnJob) -> SettledTurn:
        self.start(job)
        await asyncio.wait_for(job.task, 5)
        assert job.settled is not None and job.result() is job.settled
        return job.settled

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics._own.get_sample_value(name, labels)  # type: ignore[union-attr]

    def log_line(self) -> dict[str, Any]:
        (record,) = self.lines.records
        return vars(record)

    def record(self) -> dict[str, Any]:
        entry = self.recorder.pending[-1]
        assert entry.kind == "complete"
        return orjson.loads(entry.row.record)

    def health(self) -> dict[str, Any]:
        return self.window.summary(None, 1)


def assert_times_agree(observers: Observers, summary: SettledTurn, provider: str) -> None:
    """Duration, time to first token and overhead: the same figures in every observer."""
    labels = {"provider": provider, "model": MODEL}
    assert (
        observers.metric("gateway_stream_duration_seconds_sum", **labels, outcome=summary.outcome) == summary.duration
    )
    assert observers.metric("gateway_overhead_seconds_sum", **labels) == summary.overhead
    assert observers.metric("gateway_upstream_latency_seconds_sum", **labels) == summary.upstream_wait
    assert summary.overhead == max(summary.duration - summary.upstream_wait, 0.0)
    line = observers.log_line()
    assert line["outcome"] == summary.outcome
    assert line["durationMs"] == round(summary.duration * 1000, 1)
    record = observers.record()
    assert record["outcome"] == summary.outcome
    assert record["createdAt"] == summary.created_at_ms and record["settledAt"] == summary.settled_at_ms
    assert record["durationMs"] == summary.duration_ms == record["settledAt"] - record["createdAt"]
    health = observers.health()
    assert health["turns"] == {summary.outcome: 1}
    assert health["overheadMs"]["p50"] == round(summary.overhead * 1000, 2)
    if summary.ttft is None:
        assert observers.metric("gateway_time_to_first_token_seconds_count", **labels) is None
        assert line["ttftMs"] is None and record["ttftMs"] is None
        assert health["ttftMs"]["count"] == 0
    else:
        assert observers.metric("gateway_time_to_first_token_seconds_sum", **labels) == summary.ttft
        assert line["ttftMs"] == round(summary.ttft * 1000, 1)
        assert record["ttftMs"] == round(summary.ttft * 1000)
        assert health["ttftMs"]["p50"] == round(summary.ttft * 1000, 2)
        assert 0 <= summary.ttft <= summary.duration


def retryable(status: int = 503) -> ProviderError:
    return ProviderError(f"returned HTTP {status}", status=status, retryable=True, kind="http")


async def test_a_retried_turn(tmp_path):
    observers = Observers(tmp_path, retries=2)
    provider = FakeProvider(scripts=[[retryable()], [retryable()], text_frames("ok")])
    summary = await observers.run(new_job(provider))

    assert summary.outcome == "done" and summary.cancelled_by is None and summary.ttft is not None
    assert summary.steps == (
        AttemptStep("fake", "m", None, NextStep.RETRY),
        AttemptStep("fake", "m", None, NextStep.RETRY),
        AttemptStep("fake", "m", None, None),
    )
    assert (summary.retries, summary.fallbacks) == (2, 0)
    assert_times_agree(observers, summary, "fake")
    assert observers.metric("gateway_retries_total", provider="fake", model=MODEL) == 2
    assert observers.metric("gateway_fallbacks_total", provider="fake", model=MODEL) is None
    assert observers.health()["providers"]["fake"] == {
        "turns": 1,
        "errors": 0,
        "retries": 2,
        "fallbacks": 0,
        "timeouts": 0,
    }
    assert observers.log_line()["attempts"] == len(observers.record()["attempts"]) == 3


async def test_a_turn_that_fell_back_after_a_first_event_timeout(tmp_path):
    observers = Observers(tmp_path, retries=0, first_event_timeout=0.05)
    first, second = (
        FakeProvider(name="first", scripts=[[HANG]]),
        FakeProvider(name="second", scripts=[text_frames("ok")]),
    )
    summary = await observers.run(new_job(first, second))

    assert summary.outcome == "done" and summary.ttft is not None
    assert summary.steps == (
        AttemptStep("first", "m", "first_event", NextStep.FALLBACK),
        AttemptStep("second", "m", None, None),
    )
    assert (summary.retries, summary.fallbacks) == (0, 1)
    assert summary.upstream_wait >= 0.05  # the silent first attempt was waited on
    assert_times_agree(observers, summary, "second")
    assert observers.metric("gateway_fallbacks_total", provider="first", model=MODEL) == 1
    assert observers.metric("gateway_retries_total", provider="first", model=MODEL) is None
    assert observers.metric("gateway_timeouts_total", kind="first_event") == 1
    providers = observers.health()["providers"]
    assert providers["first"] == {"turns": 0, "errors": 0, "retries": 0, "fallbacks": 1, "timeouts": 1}
    assert providers["second"] == {"turns": 1, "errors": 0, "retries": 0, "fallbacks": 0, "timeouts": 0}


async def test_a_turn_its_client_aborted(tmp_path):
    observers = Observers(tmp_path)
    provider = FakeProvider(scripts=[[[{"type": "text_start"}], [{"type": "text_delta", "delta": "so far"}], HANG]])
    job = new_job(provider)
    observers.start(job)
    for _ in range(1000):
        if job.turn.first_content_at is not None:
            break
        await asyncio.sleep(0)
    job.interrupt(Interrupt.CLIENT)
    await asyncio.wait_for(job.task, 5)
    summary = job.settled
    assert summary is not None

    assert summary.outcome == "aborted" and summary.cancelled_by is Cancellation.CLIENT and summary.ttft is not None
    assert summary.steps == (AttemptStep("fake", "m", None, None),)
    assert_times_agree(observers, summary, "fake")
    assert observers.metric("gateway_cancellations_total", kind="client") == 1
    assert observers.log_line()["clientDisconnected"] is observers.record()["clientDisconnected"] is True


async def test_a_turn_that_never_got_a_first_token(tmp_path):
    observers = Observers(tmp_path)
    provider = FakeProvider(scripts=[[ProviderError("returned HTTP 400", status=400, kind="http")]])
    summary = await observers.run(new_job(provider))

    assert summary.outcome == "error" and summary.ttft is None and summary.cancelled_by is None
    assert summary.steps == (AttemptStep("fake", "m", None, None),)
    assert_times_agree(observers, summary, "fake")
    assert (
        observers.metric("gateway_requests_total", provider="fake", model=MODEL, outcome="error", door="unified") == 1
    )
    assert observers.health()["providers"]["fake"]["errors"] == 1


DOOR_FIELDS = ("request_id", "outcome", "message", "status", "failure", "retry_after_ms", "kind", "error_message")


async def test_what_a_door_reads_at_the_terminal_event_is_what_the_observers_get(tmp_path):
    """An encoder asks for the settled turn as it takes the terminal event, while the dispatcher still reads the
    upstream for late frames: the record it gets then says what the one the observers get afterwards says."""
    observers = Observers(tmp_path)
    late = asyncio.Event()
    provider = FakeProvider(scripts=[[*text_frames("ok"), Gate(late), [{"type": "text_delta", "delta": "late"}]]])
    job = new_job(provider)
    observers.dispatcher.start(job)
    while (event := await job.turn.next_event()) is not None and event["type"] not in ("done", "error"):
        pass
    at_terminal = job.result()
    assert job.settled is None  # the dispatcher has not finished: it waits for a late frame
    late.set()
    await asyncio.wait_for(job.task, 5)
    assert job.settled is not None and job.turn.late_frames == 1
    assert [getattr(at_terminal, name) for name in DOOR_FIELDS] == [getattr(job.settled, name) for name in DOOR_FIELDS]
    assert observers.record()["outcome"] == at_terminal.outcome == "done"
