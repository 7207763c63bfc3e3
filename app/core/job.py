"""One turn as the dispatcher drives it: the routes it may take (`Route`), what its request fixes
(`TurnRequest`), its progress (`TurnJob`, written by the dispatcher only) and what an observer of turns
implements (`TurnObserver`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.contract.attribution import Attribution
from app.contract.catalog_entries import Deployment, ModelInfo, Pool
from app.contract.failures import Attempt, Interrupt
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.core.settled import SettledTurn, settled_turn
from app.providers.base import Provider
from app.stream.turn import Turn


@dataclass
class Route:
    provider: Provider
    model: ModelInfo
    pool: Pool | None = None  # one deployment of this pool (consecutive routes of the plan share it)
    deployment: Deployment | None = None

    @property
    def label(self) -> str:
        return f"{self.provider.name}/{self.model.id}"


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What a turn's request fixes once the gateway admitted it: the attempt plan, what to send, who asked,
    through which door, and when."""

    routes: tuple[Route, ...]
    context: Context
    options: StreamOptions
    api_key_id: str | None = None
    requested_model: str = ""
    fallback: tuple[str, ...] = ()
    door: str = "unified"  # the client wire format: unified | pi | openai-chat | anthropic-messages | …
    session: str | None = None  # an agent's session header: a pool's conversation key after `options.sessionId`
    resumable: bool = False  # its events are kept for `GET /v1/stream/{id}` (`app.resume`)
    attribution: Attribution = Attribution()  # team, end user, tags, session (records, spend)
    started_wall: float = field(default_factory=time.time)  # wall clock, epoch seconds: when it was accepted


@dataclass(eq=False, slots=True, weakref_slot=True)  # slots: one per open stream
class TurnJob:
    """A turn's request, its event stream, and its progress: every field below `request` is written by the
    dispatcher (`app.core.dispatcher`) only. Observers read the progress through the settled record
    (`settled`, handed to `TurnObserver.turn_finished`); a door reads the job as its `TurnView`."""

    turn: Turn
    request: TurnRequest
    attempts: list[Attempt] = field(default_factory=list, init=False)
    upstream_frames: int = field(default=0, init=False)
    # Seconds spent awaiting the upstream (open and each next frame), for metrics.
    upstream_wait: float = field(default=0.0, init=False)
    client_disconnected: bool = field(default=False, init=False)
    # Pending: set by `interrupt`, cleared once the pump handled it.
    interrupt_reason: Interrupt | None = field(default=None, init=False)
    # The interrupt that settled the turn (client, shutdown, total, writer).
    ended_by: Interrupt | None = field(default=None, init=False)
    task: asyncio.Task[None] | None = field(default=None, init=False)  # the pump (`Dispatcher.start`)
    # Every deployment of the plan's pools was cooled or at a quota past the first-event timeout, and nothing
    # else could serve: the soonest one's wait, which the answer gives as Retry-After (429).
    pools_busy_ms: int | None = field(default=None, init=False)
    # The current attempt's first content event (loop time) and the upstream frames counted then: a pool's
    # latency estimates (time to first token, the gaps after it).
    first_token_at: float | None = field(default=None, init=False)
    frames_at_first_token: int = field(default=0, init=False)
    # The client's hosted tools the current attempt's vendor is sent without (`app.providers.hosted`): once the
    # turn started, those of the provider that serves it (`dropped_tools`).
    hosted_dropped: tuple[str, ...] = field(default=(), init=False)
    # The request's fields the current attempt's vendor is sent without (`app.providers.sampling`, a turn that
    # drops params): once the turn started, those of the provider that serves it (`dropped_params`).
    params_dropped: tuple[str, ...] = field(default=(), init=False)
    settled: SettledTurn | None = field(default=None, init=False)  # once the turn settled and its last attempt ended

    @property
    def pump(self) -> asyncio.Task[None]:
        """The turn's task, once `Dispatcher.start` started it (every job the gateway hands out)."""
        assert self.task is not None, "the turn was not started"
        return self.task

    def interrupt(self, reason: Interrupt) -> None:
        """Cancel the running pump for `reason`. Never lost: a reason that outranks one still pending (not yet
        seen by the pump) replaces it; a weaker one is ignored (`Interrupt` gives the precedence)."""
        if self.task is None or self.task.done():
            return
        pending = self.interrupt_reason
        if pending is None:
            self.interrupt_reason = reason
            self.task.cancel()
        elif reason.outranks(pending):
            self.interrupt_reason = reason  # the cancellation is already on its way; it now means `reason`

    def raise_dropped_interrupt(self) -> None:
        """Raise the cancellation `interrupt` sent if a call the pump awaited dropped it: a pool's Redis call
        (`app.redis_client.raise_dropped_cancellation` says how). Called where an attempt would open the
        upstream; `interrupt` is only called from other tasks, so a reason still pending there was dropped."""
        if self.interrupt_reason is not None:
            raise asyncio.CancelledError()

    # ----------------------------------------------------------------- the door's view (`app.doors.base.TurnView`)

    def usage(self) -> dict[str, Any]:
        """The usage known so far."""
        usage: dict[str, Any] = self.turn.message["usage"]
        return usage

    def result(self) -> SettledTurn:
        """The settled turn: the record the observers got, or, before the dispatcher has finished (an encoder
        taking the terminal event), the record as of now (`app.core.settled` says what is final then)."""
        return self.settled if self.settled is not None else settled_turn(self)

    def dropped_tools(self) -> tuple[str, ...]:
        """The client's hosted tools the serving vendor was sent without (known once the turn started)."""
        return self.hosted_dropped

    def dropped_params(self) -> tuple[str, ...]:
        """The request's fields the serving vendor was sent without (known once the turn started)."""
        return self.params_dropped


class TurnObserver(Protocol):
    """What the dispatcher tells of each turn (the ledger, metrics, logs, health, limits and tracing listen).
    An observer reads; it never changes the turn. Subclass it to leave out the calls it has no use for."""

    def turn_started(self, job: TurnJob) -> None:
        """Before the first attempt."""
        return None

    def attempt_started(self, job: TurnJob, route: Route) -> None:
        """An attempt on `route` (the last of `job.attempts`) is about to send its request (tracing opens its
        span here, whose context the request carries)."""
        return None

    def turn_finished(self, job: TurnJob, settled: SettledTurn) -> None:
        """Once, after the turn settled and its last attempt ended: `settled` is its record."""
        ...
