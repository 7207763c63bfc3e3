"""A settled turn as a door sees it (`app.doors.base.TurnResult`): what ended it, as a `Failure` and the HTTP
status an answer gives it, read from the dispatcher's `TurnJob`; and `JobView`, the running turn as its door's
encoder may see it. Used by the HTTP glue (`app.api.turns`), the token counting glue and the tracer."""

from __future__ import annotations

from typing import Any

from app.contract.failures import ErrorKind
from app.contract.failures import Interrupt
from app.core.job import TurnJob
from app.doors.base import Failure, TurnResult

CLIENT_CLOSED_STATUS = 499  # what a non-streaming answer nobody reads any more carries (nginx's convention)


class JobView:
    """A running turn as its encoder may see it (`app.doors.base.TurnView`)."""

    __slots__ = ("_job",)

    def __init__(self, job: TurnJob) -> None:
        self._job = job

    def usage(self) -> dict[str, Any]:
        return self._job.turn.message["usage"]

    def result(self) -> TurnResult:
        return turn_result(self._job)

    def dropped_tools(self) -> tuple[str, ...]:
        return self._job.dropped_tools


def turn_result(job: TurnJob) -> TurnResult:
    """A settled turn as doors see it: outcome, message, and for an error its kind and HTTP status."""
    turn = job.turn
    outcome = turn.outcome or "error"
    message = turn.message
    if outcome == "done":
        return TurnResult(turn.request_id, outcome, message)
    failure, status = _classify(job)
    last = job.attempts[-1] if job.attempts else None
    retry_after_ms = last.retry_after_ms if last is not None else job.pools_busy_ms
    kind = last.kind if last is not None else None
    return TurnResult(turn.request_id, outcome, message, status, failure, retry_after_ms, kind)


def _classify(job: TurnJob) -> tuple[Failure, int]:
    if job.turn.outcome == "aborted" or job.client_disconnected:
        return Failure.ABORTED, CLIENT_CLOSED_STATUS
    if job.ended_by is Interrupt.SHUTDOWN:
        return Failure.SHUTTING_DOWN, 503
    last = job.attempts[-1] if job.attempts else None
    if job.ended_by is Interrupt.TOTAL or (last is not None and last.timeout in ("first_event", "idle", "transport")):
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

