"""The dispatcher on its own, with a scripted provider (tests/fake_provider.py): the watchdog's transitions,
interrupt precedence, retry and fallback."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from app.catalog import Catalog
from app.contract.catalog_entries import Deployment, Pool
from app.contract.failures import AttemptOutcome, ErrorKind, Interrupt
from app.core.dispatcher import Dispatcher
from app.core.job import TurnJob
from app.core.watchdog import Watchdog, WatchPhase
from app.pools.balancer import Pools
from app.pools.state import MemoryPoolStore
from app.providers.base import ProviderError
from app.settings import Settings
from tests.fake_provider import HANG, FakeProvider, Gate, new_job, text_frames

TIMEOUTS = dict(
    first_event_timeout=10.0, idle_timeout=3.0, total_timeout=100.0, late_frame_grace=1.0, first_content_deadline=0
)


# ----------------------------------------------------------------- the watchdog, on a fake clock


class FakeTimer:
    def __init__(self, loop: "FakeLoop", when: float, callback: Callable[[], None]) -> None:
        self.loop, self._when, self.callback, self.cancelled = loop, when, callback, False

    def when(self) -> float:
        return self._when

    def cancel(self) -> None:
        self.cancelled = True


class FakeLoop:
    """The two things the watchdog takes from its loop: a clock and `call_at`. `advance` fires due timers."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[FakeTimer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self, when, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for timer in list(self.timers):
            if not timer.cancelled and timer.when() <= self.now:
                self.timers.remove(timer)
                timer.callback()


class RecordingJob:
    def __init__(self) -> None:
        self.interrupts: list[Interrupt] = []
        self.turn = SimpleNamespace(started=False)  # whether the turn's `start` went to the client

    def interrupt(self, reason: Interrupt) -> None:
        self.interrupts.append(reason)


def new_watchdog(**settings: float) -> tuple[Watchdog, FakeLoop, RecordingJob]:
    loop, job = FakeLoop(), RecordingJob()
    return Watchdog(job, Settings(**{**TIMEOUTS, **settings}), loop=loop), loop, job


def armed(watchdog: Watchdog) -> tuple[float, Interrupt]:
    """The deadline the timer is armed for, and the one it would fire."""
    when, reason = watchdog.deadline()
    assert watchdog.armed_at == when, (watchdog.phase, watchdog.armed_at, when)
    return when, reason


def test_a_new_turn_runs_only_the_total_timeout():
    watchdog, loop, _ = new_watchdog()
    assert watchdog.phase is WatchPhase.STARTING
    assert armed(watchdog) == (loop.now + 100, Interrupt.TOTAL)


def test_attempt_started_arms_the_first_event_timeout():
    watchdog, loop, _ = new_watchdog()
    loop.advance(5)
    watchdog.attempt_started()
    assert watchdog.phase is WatchPhase.AWAITING_FIRST_EVENT
    assert armed(watchdog) == (loop.now + 10, Interrupt.FIRST_EVENT)


def test_the_first_frame_arms_the_idle_timeout():
    watchdog, loop, _ = new_watchdog()
    watchdog.attempt_started()
    loop.advance(1)
    watchdog.frame()
    assert watchdog.phase is WatchPhase.STREAMING
    assert armed(watchdog) == (loop.now + 3, Interrupt.IDLE)  # sooner than the first-event deadline


def test_later_frames_move_the_idle_deadline_and_an_early_timer_re_arms():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.frame()
    for _ in range(5):
        loop.advance(2)
        watchdog.frame()  # only a timestamp: the timer stays where it was
    assert watchdog.deadline() == (loop.now + 3, Interrupt.IDLE)
    assert job.interrupts == []  # the early timer looked, found the deadline moved, and re-armed
    assert watchdog.armed_at is not None and watchdog.armed_at <= loop.now + 3
    loop.advance(3)
    loop.advance(0)
    assert job.interrupts == [Interrupt.IDLE]


def test_between_attempts_runs_only_the_total_timeout():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.between_attempts()
    assert watchdog.phase is WatchPhase.BETWEEN_ATTEMPTS
    assert armed(watchdog) == (loop.now + 100, Interrupt.TOTAL)
    loop.advance(50)  # a long backoff is no first-event timeout
    assert job.interrupts == []


def test_paused_runs_only_the_total_timeout():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.frame()
    watchdog.paused()
    assert watchdog.phase is WatchPhase.PAUSED
    assert armed(watchdog) == (loop.now + 100, Interrupt.TOTAL)
    loop.advance(30)  # a slow reader is not upstream silence
    assert job.interrupts == []


def test_resumed_re_arms_the_idle_timeout():
    """Issue 11 defect 2: a timer that looked at the deadlines while paused was left armed for the total
    timeout, so a vendor that stalled after a slow reader held the stream for the total timeout."""
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.frame()
    watchdog.paused()
    loop.advance(30)  # the timer runs while paused
    watchdog.resumed()
    assert watchdog.phase is WatchPhase.STREAMING
    assert armed(watchdog) == (loop.now + 3, Interrupt.IDLE)
    loop.advance(3)
    assert job.interrupts == [Interrupt.IDLE]


def test_settled_runs_only_the_late_frame_grace():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.frame()
    watchdog.settled()
    assert watchdog.phase is WatchPhase.SETTLED
    assert armed(watchdog) == (loop.now + 1, Interrupt.GRACE)
    watchdog.frame()  # late frames change nothing
    assert watchdog.phase is WatchPhase.SETTLED
    loop.advance(1)
    assert job.interrupts == [Interrupt.GRACE]


def test_pausing_after_settlement_keeps_the_late_frame_grace():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    watchdog.frame()
    watchdog.settled()
    watchdog.paused()
    watchdog.resumed()
    assert watchdog.phase is WatchPhase.SETTLED and armed(watchdog) == (loop.now + 1, Interrupt.GRACE)


def test_the_total_timeout_fires_in_any_phase_but_settled():
    watchdog, loop, job = new_watchdog()
    watchdog.attempt_started()
    for _ in range(40):
        loop.advance(2.5)
        watchdog.frame()
    assert job.interrupts == [Interrupt.TOTAL]


def test_the_first_content_deadline_ends_the_turn_across_attempts_until_the_turn_has_started():
    """Issue 39 item 10: retries before content are bounded as a whole, not only one attempt at a time."""
    watchdog, loop, job = new_watchdog(first_content_deadline=15.0)
    assert armed(watchdog) == (loop.now + 15, Interrupt.FIRST_CONTENT)
    watchdog.attempt_started()
    loop.advance(10)  # the first attempt's first-event timeout: the turn retries
    assert job.interrupts == [Interrupt.FIRST_EVENT]
    watchdog.between_attempts()
    assert armed(watchdog)[1] is Interrupt.FIRST_CONTENT
    loop.advance(1)
    watchdog.attempt_started()  # its first-event deadline (11 + 10) is past the turn's (15)
    loop.advance(4)
    assert job.interrupts == [Interrupt.FIRST_EVENT, Interrupt.FIRST_CONTENT]


def test_the_first_content_deadline_no_longer_counts_once_the_turn_has_started():
    watchdog, loop, job = new_watchdog(first_content_deadline=15.0)
    watchdog.attempt_started()
    loop.advance(5)
    watchdog.frame()
    job.turn.started = True  # its `start` went out: the deadline is met, the idle timeout runs on
    for _ in range(10):
        loop.advance(2)
        watchdog.frame()
    assert job.interrupts == [] and watchdog.deadline()[1] is Interrupt.IDLE


def test_stop_disarms():
    watchdog, loop, job = new_watchdog()
    watchdog.stop()
    assert watchdog.armed_at is None
    loop.advance(1000)
    assert job.interrupts == []


# ----------------------------------------------------------------- interrupt precedence


def test_interrupt_precedence_order():
    order = [
        Interrupt.WRITER,
        Interrupt.CLIENT,
        Interrupt.SHUTDOWN,
        Interrupt.TOTAL,
        Interrupt.FIRST_EVENT,
        Interrupt.IDLE,
        Interrupt.GRACE,
    ]
    for stronger, weaker in zip(order, order[1:]):
        assert stronger.outranks(weaker) and not weaker.outranks(stronger)
    assert [r for r in Interrupt if r.ends_attempt_only] == [Interrupt.FIRST_EVENT, Interrupt.IDLE]


def dispatcher(**settings: Any) -> Dispatcher:
    return Dispatcher({}, Catalog(), Settings(**{"retries": 1, "retry_backoff_ms": 1, **settings}))


async def until(condition: Callable[[], bool]) -> None:
    """Let other tasks run until `condition` holds (bounded: a test that waits for nothing fails)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def started(provider: FakeProvider, *scripts: list[Any], **settings: Any):
    provider.scripts = list(scripts)
    job = new_job(provider)
    job.turn.close_reader()  # like /v1/complete: nobody reads events
    dispatcher(**settings).start(job)
    await until(lambda: provider.opened == 1)
    await asyncio.sleep(0)  # the pump now waits on the upstream
    return job


@pytest.mark.parametrize("order", ["timeout first", "client first"])
@pytest.mark.parametrize("timeout", [Interrupt.FIRST_EVENT, Interrupt.IDLE])
async def test_a_client_leaving_with_a_timeout_is_never_lost(timeout, order):
    """Issue 11 defect 3: both in one loop iteration; the turn must end aborted, with no retry."""
    provider = FakeProvider()
    job = await started(provider, [HANG], text_frames("never read"))
    reasons = [timeout, Interrupt.CLIENT] if order == "timeout first" else [Interrupt.CLIENT, timeout]
    for reason in reasons:
        job.interrupt(reason)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "aborted" and job.client_disconnected
    assert provider.opened == 1 and provider.closed == 1  # no retry, the upstream closed
    assert job.turn.message["errorMessage"] == "fake/m request aborted: client disconnected"


class DroppingPoolStore(MemoryPoolStore):
    """A pool store whose `acquire` drops a cancellation that arrives as it answers, as redis-py's socket
    writes do on Python 3.11 (`app.redis_client.raise_dropped_cancellation`)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def acquire(self, *args: Any, **kwargs: Any) -> Any:
        self.asked.set()
        try:
            await self.answer
        except asyncio.CancelledError:
            pass
        return await super().acquire(*args, **kwargs)


async def test_a_client_leaving_as_a_pool_call_drops_the_cancellation_opens_no_upstream():
    provider = FakeProvider()
    provider.scripts = [text_frames("never read")]
    deployment = Deployment("fake/m", "fake", "m")
    plain = new_job(provider)
    pooled = replace(plain.request.routes[0], pool=Pool("p", (deployment,)), deployment=deployment)
    job = TurnJob(plain.turn, replace(plain.request, routes=(pooled,)))
    job.turn.close_reader()
    store = DroppingPoolStore()
    Dispatcher({}, Catalog(), Settings(retries=1, retry_backoff_ms=1), Pools(store)).start(job)
    await store.asked.wait()
    store.answer.set_result(None)  # the pool answers, and in the same step of the loop the client leaves
    job.interrupt(Interrupt.CLIENT)
    await asyncio.wait_for(job.task, 5)
    assert provider.opened == 0  # before: the attempt went on and opened the upstream for nobody
    assert job.turn.outcome == "aborted" and job.client_disconnected
    assert (await store.snapshot("p", ["fake/m"], None, 0)).states["fake/m"].in_flight == 0  # slot given back


async def test_a_shutdown_with_a_timeout_ends_the_turn():
    provider = FakeProvider()
    job = await started(provider, [HANG], text_frames("never read"))
    job.interrupt(Interrupt.IDLE)
    job.interrupt(Interrupt.SHUTDOWN)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "error" and not job.client_disconnected
    assert job.turn.message["errorMessage"] == "fake/m gateway shutting down"
    assert provider.opened == 1


async def test_a_weaker_interrupt_after_a_stronger_one_is_ignored():
    provider = FakeProvider()
    job = await started(provider, [HANG])
    job.interrupt(Interrupt.SHUTDOWN)
    job.interrupt(Interrupt.FIRST_EVENT)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.message["errorMessage"] == "fake/m gateway shutting down"


async def test_a_timeout_alone_ends_the_attempt_and_the_turn_retries():
    provider = FakeProvider()
    job = await started(provider, [HANG], text_frames("second try"))
    job.interrupt(Interrupt.FIRST_EVENT)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "done" and job.turn.message["content"][0]["text"] == "second try"
    assert provider.opened == 2 and provider.closed == 2
    first = job.attempts[0]
    assert first.outcome == "error" and "first-event timeout fired after" in first.error_message


async def test_a_timeout_after_content_ends_the_turn():
    provider = FakeProvider()
    job = await started(provider, [[{"type": "text_start"}], [{"type": "text_delta", "delta": "so far"}], HANG])
    job.interrupt(Interrupt.IDLE)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "error" and provider.opened == 1
    assert job.turn.message["errorMessage"].startswith("fake/m idle timeout fired after")
    assert job.turn.message["content"] == [{"type": "text", "text": "so far"}]


async def test_a_client_leaving_after_the_terminal_event_aborted_nothing():
    gate = asyncio.Event()
    provider = FakeProvider()
    job = await started(provider, [*text_frames("whole"), Gate(gate)])  # settled, then late-frame grace
    await until(lambda: job.turn.settled)
    job.interrupt(Interrupt.CLIENT)
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "done" and not job.client_disconnected


# ----------------------------------------------------------------- the idle timeout after a slow reader


async def test_a_vendor_stalling_after_a_slow_reader_hits_the_idle_timeout():
    """Defect 2 through the dispatcher: the pump pauses for a reader that does not read (longer than the
    first-event timeout, so the timer looks at the deadlines while paused), the reader catches up, the vendor
    stalls: the idle timeout ends the turn (within the 10 s this test waits), not the total one."""
    provider = FakeProvider(
        scripts=[[[{"type": "text_start"}], *[[{"type": "text_delta", "delta": "x" * 100}]] * 40, HANG]]
    )
    job = new_job(provider, max_pending_bytes=1000)
    settings = dict(first_event_timeout=0.2, idle_timeout=0.2, total_timeout=600.0)  # the old bug waited 600 s
    dispatcher(**settings).start(job)
    await until(lambda: job.turn.congested)
    await asyncio.sleep(0.5)  # the slow reader (the scenario under test, not synchronisation)
    events = []
    while (event := await asyncio.wait_for(job.turn.next_event(), 10)) is not None:
        events.append(event)
    assert events[-1]["type"] == "error"
    assert events[-1]["errorMessage"].startswith("fake/m idle timeout fired after 0.2s"), events[-1]["errorMessage"]


# ----------------------------------------------------------------- the first token of a reply that comes in one read


async def test_the_first_token_reaches_the_reader_before_the_rest_of_the_read_is_translated():
    """A whole reply in one read (the fake upstream hands its frames over without waiting): the pump lets the
    reader have the first delta before it translates the rest, so the first token does not wait for the last."""
    provider = FakeProvider(scripts=[text_frames(*[f"t{i}" for i in range(20)])])
    job = new_job(provider)
    dispatcher().start(job)
    seen = []
    async with asyncio.timeout(5):  # the reader waits in this task, as the response's writer does (no wait_for task)
        while (event := await job.turn.next_event()) is not None:
            seen.append(event["type"])
            if event["type"] == "text_delta":
                break
    assert seen == ["start", "text_start", "text_delta"]
    assert not job.turn.settled  # the other 19 deltas, the end and the finish are not translated yet
    await asyncio.wait_for(job.task, 5)
    assert job.turn.outcome == "done" and job.turn.message["content"][0]["text"] == "".join(f"t{i}" for i in range(20))


# ----------------------------------------------------------------- retry and fallback


def retryable(status: int = 503, retry_after_ms: int | None = None) -> ProviderError:
    return ProviderError(
        f"returned HTTP {status}", status=status, retryable=True, kind="http", retry_after_ms=retry_after_ms
    )


async def run_job(*providers: FakeProvider, **settings: Any):
    job = new_job(*providers)
    job.turn.close_reader()
    dispatcher(**settings).start(job)
    await asyncio.wait_for(job.task, 5)
    return job


async def test_a_retryable_failure_is_retried_on_the_same_route():
    provider = FakeProvider(scripts=[[retryable()], text_frames("ok")])
    job = await run_job(provider)
    assert job.turn.outcome == "done" and provider.opened == 2
    assert [a.outcome for a in job.attempts] == ["error", "done"]
    assert job.attempts[0].http_status == 503


async def test_retries_exhausted_fall_back_to_the_next_route():
    first, second = FakeProvider(name="first"), FakeProvider(name="second")
    first.scripts = [[retryable(429)], [retryable(429)]]
    second.scripts = [text_frames("from the fallback")]
    job = await run_job(first, second)
    assert job.turn.outcome == "done" and job.turn.message["provider"] == "second"
    assert [(a.provider, a.outcome) for a in job.attempts] == [
        ("first", "error"),
        ("first", "error"),
        ("second", "done"),
    ]


async def test_a_failure_that_is_not_retryable_ends_the_turn():
    first, second = FakeProvider(name="first"), FakeProvider(name="second")
    first.scripts = [[ProviderError("returned HTTP 400", status=400, kind="http")]]
    job = await run_job(first, second)
    assert job.turn.outcome == "error" and second.opened == 0
    assert job.turn.message["errorMessage"] == "first/m returned HTTP 400"


async def test_a_failure_after_content_is_never_retried():
    provider = FakeProvider(
        scripts=[[[{"type": "text_start"}], [{"type": "text_delta", "delta": "partial"}], retryable()]]
    )
    job = await run_job(provider)
    assert job.turn.outcome == "error" and provider.opened == 1
    assert job.turn.message["content"] == [{"type": "text", "text": "partial"}]


async def test_every_route_failing_names_the_attempts_and_keeps_the_retry_hint():
    provider = FakeProvider(scripts=[[retryable(429, 5)], [retryable(429, 7)]])
    job = await run_job(provider)
    assert job.turn.message["errorMessage"] == "fake/m returned HTTP 429 (after 2 attempts) retry-after-ms=7"


def test_backoff_honours_retry_after_up_to_the_cap():
    d = dispatcher(retry_backoff_ms=100, retry_after_cap_ms=1000)
    assert d._backoff(0, retryable(retry_after_ms=250)) == 0.25
    assert d._backoff(0, retryable(retry_after_ms=60_000)) == 1.0
    assert [d._backoff(n, retryable()) for n in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]


async def test_a_body_that_ends_without_its_terminal_signal_is_truncated():
    provider = FakeProvider(scripts=[[[{"type": "text_start"}], [{"type": "text_delta", "delta": "cut"}]]])
    job = await run_job(provider)
    assert job.turn.outcome == "error" and "truncated" in job.turn.message["errorMessage"]


# ----------------------------------------------------------------- the token limit inside a tool call


@pytest.mark.parametrize("closed_by_adapter", [False, True])
async def test_arguments_cut_off_by_the_token_limit_name_the_call(closed_by_adapter):
    """Whether the adapter leaves the call open (Anthropic) or closes it at the message's end (Responses, Chat
    Completions), the turn ends with one error naming the call and the token limit (CONTRACT invariant 5)."""
    end = [{"type": "toolcall_end"}] if closed_by_adapter else []
    provider = FakeProvider(
        scripts=[
            [
                [{"type": "toolcall_start", "id": "call_1", "toolName": "get_weather"}],
                [{"type": "toolcall_delta", "delta": '{"city": "Pa'}],
                [*end, {"type": "finish", "reason": "length"}],
            ]
        ]
    )
    job = await run_job(provider)
    assert job.turn.outcome == "error"
    assert job.turn.message["errorMessage"] == (
        "fake/m tool call call_1 (get_weather): arguments were cut off by the token limit (stop reason length)"
    )
    assert job.turn.message["content"] == []


async def test_arguments_that_do_not_parse_at_a_normal_stop_are_not_called_cut_off():
    provider = FakeProvider(
        scripts=[
            [
                [{"type": "toolcall_start", "id": "call_1", "toolName": "t"}],
                [{"type": "toolcall_delta", "delta": '{"a": '}],
                [{"type": "toolcall_end"}, {"type": "finish", "reason": "toolUse"}],
            ]
        ]
    )
    job = await run_job(provider)
    assert "arguments are not valid JSON" in job.turn.message["errorMessage"]


# ----------------------------------------------------------------- attempts as typed data


async def test_attempts_carry_kinds_and_interrupts_and_keep_the_record_shape():
    provider = FakeProvider()
    job = await started(provider, [HANG], [retryable(503, 2)], text_frames("third"), retries=2)
    job.interrupt(Interrupt.FIRST_EVENT)
    await asyncio.wait_for(job.task, 5)
    timed_out, refused, served = job.attempts
    assert (timed_out.kind, timed_out.interrupt, timed_out.timeout) == (
        ErrorKind.TIMEOUT,
        Interrupt.FIRST_EVENT,
        "first_event",
    )
    assert (refused.kind, refused.http_status, refused.retry_after_ms, refused.timeout) == (
        ErrorKind.HTTP,
        503,
        2,
        None,
    )
    assert (served.outcome, served.kind, served.error_message) == (AttemptOutcome.DONE, None, None)
    assert set(refused.record()) == {
        "provider",
        "api",
        "model",
        "startedAt",
        "endedAt",
        "outcome",
        "httpStatus",
        "errorMessage",
    }
    assert set(served.record()) == {"provider", "api", "model", "startedAt", "endedAt", "outcome"}
    assert job.ended_by is None


@pytest.mark.parametrize("reason", [Interrupt.CLIENT, Interrupt.SHUTDOWN, Interrupt.TOTAL])
async def test_the_interrupt_that_ended_the_turn_is_on_the_job_and_its_last_attempt(reason):
    provider = FakeProvider()
    job = await started(provider, [HANG])
    job.interrupt(reason)
    await asyncio.wait_for(job.task, 5)
    assert job.ended_by is reason and job.attempts[-1].interrupt is reason
    assert job.attempts[-1].timeout == ("total" if reason is Interrupt.TOTAL else None)
    assert job.attempts[-1].outcome == ("aborted" if reason is Interrupt.CLIENT else "error")
