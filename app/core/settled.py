"""A settled turn, computed once: how it ended as a door answers it, and the figures every observer records.

The dispatcher builds the `SettledTurn` (`settled_turn`) once the turn has settled and its last attempt has
ended, keeps it on the job (`TurnJob.settled`) and hands it to each observer (`TurnObserver.turn_finished`):
metrics (`app.telemetry.metrics`), the request log (`app.telemetry.logs`), the ledger's record
(`app.ledger.base.build_record`), the console's health window (`app.telemetry.health`), tracing
(`app.telemetry.tracing.turns`) and the limits' charge (`app.policy.limits`) read it instead of working the
figures out again, so they never disagree. A door reads it through its `TurnView` (`TurnJob.result`).

A door's encoder asks for it when it takes the terminal event, which can be before the dispatcher has
finished (late frames are still counted, the upstream is being closed): `TurnJob.result` then builds it as of
that moment. What a door reads (outcome, message, failure, status, retry hint, kind) no longer changes once the
turn settled; the times and counts are final in the record the observers get.

Times: `duration` and `ttft` are seconds on the monotonic clock from the request's arrival (`Turn.created_at`);
`created_at_ms` and `settled_at_ms` are wall-clock epoch milliseconds (the record's `createdAt` and
`settledAt`, whose difference is its `durationMs`).

Doors may import this module, and no other of `app.core`: at run time it imports only the contract.
"""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from app.contract.failures import Attempt, ErrorKind, Failure, Interrupt

if TYPE_CHECKING:
    from app.core.job import TurnJob

CLIENT_CLOSED_STATUS = 499  # what a non-streaming answer nobody reads any more carries (nginx's convention)


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
    same = (following.provider, following.model, following.deployment) == (
        attempt.provider,
        attempt.model,
        attempt.deployment,
    )
    return NextStep.RETRY if same else NextStep.FALLBACK


@dataclass(frozen=True, slots=True)
class AttemptStep:
    """One attempt of a settled turn, as the observers count it."""

    provider: str
    model: str
    timeout: str | None  # the timeout that ended it (`Attempt.timeout`), if one did
    then: NextStep | None  # how the turn went on after it; None for the last attempt


@dataclass(frozen=True, slots=True)
class SettledTurn:
    """One settled turn: how it ended, as a door answers it (the final or partial `AssistantMessage` and, for
    an error, the kind of failure and the HTTP status a non-streaming answer or a refused stream carries), then
    its times and attempts as every observer records them."""

    request_id: str
    outcome: str  # done | error | aborted
    message: dict[str, Any]  # the turn's AssistantMessage (the event stream's own dict)
    status: int = 200
    failure: Failure | None = None
    retry_after_ms: int | None = None  # the vendor's retry hint, or the soonest pool deployment's wait
    kind: ErrorKind | None = None  # why the last upstream attempt failed, when one did (e.g. a refusal)
    _: KW_ONLY
    created_at_ms: int = 0  # wall clock, epoch ms: when the turn was accepted
    settled_at_ms: int = 0  # wall clock, epoch ms: when it settled (upstream closed, late frames counted)
    duration: float = 0.0  # seconds from the request's arrival to settlement (monotonic)
    ttft: float | None = None  # seconds from the request's arrival to the first content event; None without one
    upstream_wait: float = 0.0  # seconds spent waiting on upstreams (connecting, response headers, each frame)
    overhead: float = 0.0  # duration minus upstream wait (includes retry backoff and slow readers), at least 0
    attempts: tuple[Attempt, ...] = ()  # every attempt, ended (the record's `attempts`)
    steps: tuple[AttemptStep, ...] = ()  # the same attempts as the observers count them
    cancelled_by: Cancellation | None = None  # the client (it left, or the turn was aborted) or a shutdown
    client_disconnected: bool = False  # the client left before the turn settled
    upstream_frames: int = 0  # wire events read from upstreams, late ones included

    @property
    def error_message(self) -> str:
        return self.message.get("errorMessage") or ""

    def retry_headers(self) -> dict[str, str]:
        """`Retry-After` (whole seconds, rounded up) when the upstream said when to retry."""
        return retry_headers(self.retry_after_ms)

    @property
    def duration_ms(self) -> int:
        """The record's `durationMs`: `settledAt - createdAt`."""
        return max(0, self.settled_at_ms - self.created_at_ms)

    @property
    def retries(self) -> int:
        return sum(1 for step in self.steps if step.then is NextStep.RETRY)

    @property
    def fallbacks(self) -> int:
        return sum(1 for step in self.steps if step.then is NextStep.FALLBACK)


def settled_turn(job: "TurnJob", *, now: float | None = None, wall_now: float | None = None) -> SettledTurn:
    """The record of `job`'s settled turn, at monotonic time `now` and wall time `wall_now` (both read from the
    clocks when not given)."""
    turn = job.turn
    now = time.monotonic() if now is None else now
    wall_now = time.time() if wall_now is None else wall_now
    duration = max(now - turn.created_at, 0.0)
    first = turn.first_content_at
    attempts = tuple(job.attempts)
    steps = tuple(
        AttemptStep(
            attempt.provider,
            attempt.model,
            attempt.timeout,
            next_step(attempt, attempts[index + 1]) if index + 1 < len(attempts) else None,
        )
        for index, attempt in enumerate(attempts)
    )
    outcome = turn.outcome or "error"
    if job.client_disconnected or outcome == "aborted":
        cancelled_by: Cancellation | None = Cancellation.CLIENT
    elif job.ended_by is Interrupt.SHUTDOWN:
        cancelled_by = Cancellation.SHUTDOWN
    else:
        cancelled_by = None
    last = attempts[-1] if attempts else None
    failure: Failure | None = None
    status = 200
    retry_after_ms = kind = None
    if outcome != "done":
        failure, status = _classify(job, outcome, last)
        retry_after_ms = last.retry_after_ms if last is not None else job.pools_busy_ms
        kind = last.kind if last is not None else None
    return SettledTurn(
        turn.request_id,
        outcome,
        turn.message,
        status,
        failure,
        retry_after_ms,
        kind,
        created_at_ms=int(job.request.started_wall * 1000),
        settled_at_ms=int(wall_now * 1000),
        duration=duration,
        ttft=None if first is None else max(first - turn.created_at, 0.0),
        upstream_wait=job.upstream_wait,
        overhead=max(duration - job.upstream_wait, 0.0),
        attempts=attempts,
        steps=steps,
        cancelled_by=cancelled_by,
        client_disconnected=job.client_disconnected,
        upstream_frames=job.upstream_frames,
    )


def _classify(job: "TurnJob", outcome: str, last: Attempt | None) -> tuple[Failure, int]:
    if outcome == "aborted" or job.client_disconnected:
        return Failure.ABORTED, CLIENT_CLOSED_STATUS
    if job.ended_by is Interrupt.SHUTDOWN:
        return Failure.SHUTTING_DOWN, 503
    if job.ended_by in (Interrupt.TOTAL, Interrupt.FIRST_CONTENT) or (
        last is not None and last.timeout in ("first_event", "idle", "transport")
    ):
        return Failure.TIMEOUT, 504
    if last is None and job.pools_busy_ms is not None:  # every deployment of its pools cooling down
        return Failure.RATE_LIMITED, 429
    if last is None:
        return Failure.UPSTREAM, 502
    return upstream_failure(last.kind, last.http_status)


def upstream_failure(kind: ErrorKind | None, http_status: int | None) -> tuple[Failure, int]:
    """What a vendor's failure (its kind, and its HTTP status when it answered one) is to a door, and the
    status an HTTP answer gives it. A refusal or safety stop answers this request's content: 400, never a 5xx
    (which the SDKs would send again, and which would get the same refusal)."""
    if kind is ErrorKind.REFUSAL:
        return Failure.REFUSED, 400
    if http_status == 429:
        return Failure.RATE_LIMITED, 429
    if http_status in (503, 529):
        return Failure.OVERLOADED, 503
    if http_status in (400, 404, 413, 422):
        return Failure.INVALID_REQUEST, http_status
    return Failure.UPSTREAM, 502


def retry_headers(retry_after_ms: int | None) -> dict[str, str]:
    """`Retry-After` in whole seconds (rounded up, at least 1) for a vendor's retry hint; none without one."""
    if retry_after_ms is None:
        return {}
    return {"Retry-After": str(max(1, -(-retry_after_ms // 1000)))}
