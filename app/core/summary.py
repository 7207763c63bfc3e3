"""What a settled turn amounts to, computed once when it settles: the figures every observer reads.

The dispatcher builds a `TurnSummary` (`summarize`) after the turn settled and its last attempt ended, sets it
on the job (`TurnJob.summary`) and then tells the observers; metrics (`app.telemetry.metrics`), the request log
(`app.telemetry.logs`), the ledger's record (`app.ledger.base.build_record`), the console's health window
(`app.telemetry.health`) and tracing read it instead of working the figures out again, so they never disagree.

Times: `duration` and `ttft` are seconds on the monotonic clock from the request's arrival (`Turn.created_at`);
`created_at_ms` and `settled_at_ms` are wall-clock epoch milliseconds (the record's `createdAt` and
`settledAt`, whose difference is its `durationMs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from app.contract.failures import Attempt, Interrupt

if TYPE_CHECKING:
    from app.core.job import TurnJob


class NextStep(StrEnum):
    """How a turn went on after an attempt that did not serve it."""

    RETRY = "retry"  # the same provider and model again
    FALLBACK = "fallback"  # the next provider or model of the plan


class Cancellation(StrEnum):
    """Who cancelled a turn from outside (metrics' `gateway_cancellations_total{kind}`)."""

    CLIENT = "client"
    SHUTDOWN = "shutdown"


def next_step(attempt: Attempt, following: Attempt) -> NextStep:
    """Whether `following` retried `attempt` (same provider, model and pool deployment) or fell back from it
    (another entry of the plan, or another deployment of the pool)."""
    same = (following.provider, following.model, following.deployment) == (attempt.provider, attempt.model, attempt.deployment)
    return NextStep.RETRY if same else NextStep.FALLBACK


@dataclass(frozen=True, slots=True)
class AttemptStep:
    """One attempt of a settled turn, as the observers count it."""

    provider: str
    model: str
    timeout: str | None  # the timeout that ended it (`Attempt.timeout`), if one did
    then: NextStep | None  # how the turn went on after it; None for the last attempt


@dataclass(frozen=True, slots=True)
class TurnSummary:
    outcome: str  # done | error | aborted
    created_at_ms: int  # wall clock, epoch ms: when the turn was accepted
    settled_at_ms: int  # wall clock, epoch ms: when it settled (upstream closed, late frames counted)
    duration: float  # seconds from the request's arrival to settlement (monotonic)
    ttft: float | None  # seconds from the request's arrival to the first content event; None without one
    upstream_wait: float  # seconds spent waiting on upstreams (connecting, response headers, each frame)
    overhead: float  # duration minus upstream wait (includes retry backoff and slow readers), at least 0
    attempts: tuple[AttemptStep, ...]
    cancelled_by: Cancellation | None  # the client (it left, or the turn was aborted) or a shutdown

    @property
    def duration_ms(self) -> int:
        """The record's `durationMs`: `settledAt - createdAt`."""
        return max(0, self.settled_at_ms - self.created_at_ms)

    @property
    def retries(self) -> int:
        return sum(1 for step in self.attempts if step.then is NextStep.RETRY)

    @property
    def fallbacks(self) -> int:
        return sum(1 for step in self.attempts if step.then is NextStep.FALLBACK)


def summarize(job: "TurnJob", *, now: float | None = None, wall_now: float | None = None) -> TurnSummary:
    """The summary of `job`'s settled turn, at monotonic time `now` and wall time `wall_now` (both read from
    the clocks when not given)."""
    turn = job.turn
    now = time.monotonic() if now is None else now
    wall_now = time.time() if wall_now is None else wall_now
    duration = max(now - turn.created_at, 0.0)
    first = turn.first_content_at
    attempts = job.attempts
    steps = tuple(
        AttemptStep(
            attempt.provider,
            attempt.model,
            attempt.timeout,
            next_step(attempt, attempts[index + 1]) if index + 1 < len(attempts) else None,
        )
        for index, attempt in enumerate(attempts)
    )
    if job.client_disconnected or turn.outcome == "aborted":
        cancelled_by: Cancellation | None = Cancellation.CLIENT
    elif job.ended_by is Interrupt.SHUTDOWN:
        cancelled_by = Cancellation.SHUTDOWN
    else:
        cancelled_by = None
    return TurnSummary(
        outcome=turn.outcome or "error",
        created_at_ms=int(job.started_wall * 1000),
        settled_at_ms=int(wall_now * 1000),
        duration=duration,
        ttft=None if first is None else max(first - turn.created_at, 0.0),
        upstream_wait=job.upstream_wait,
        overhead=max(duration - job.upstream_wait, 0.0),
        attempts=steps,
        cancelled_by=cancelled_by,
    )
