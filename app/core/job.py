"""One turn as the dispatcher drives it: the routes it may take (`Route`), its running state (`TurnJob`) and
what an observer of turns implements (`TurnObserver`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from app.catalog import Deployment, ModelInfo, Pool
from app.contract.failures import Attempt, Interrupt
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.core.summary import TurnSummary
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


@dataclass(eq=False, slots=True)  # slots: one per open stream
class TurnJob:
    """Everything a turn needs besides its event stream."""

    turn: Turn
    routes: list[Route]
    context: Context
    options: StreamOptions
    api_key_id: str | None = None
    requested_model: str = ""
    fallback: list[str] = field(default_factory=list)
    door: str = "unified"  # the client wire format: unified | pi | openai-chat | anthropic-messages
    attempts: list[Attempt] = field(default_factory=list)
    upstream_frames: int = 0
    upstream_wait: float = 0.0  # seconds spent awaiting the upstream (open and each next frame), for metrics
    client_disconnected: bool = False
    resumable: bool = False  # its events are kept for `GET /v1/stream/{id}` (app/resume/)
    resumed: int = 0  # resumptions of a resumable stream (`GET /v1/stream/{id}`) while the turn ran
    interrupt_reason: Interrupt | None = None  # pending: set by `interrupt`, cleared once the pump handled it
    ended_by: Interrupt | None = None  # the interrupt that settled the turn (client, shutdown, total, writer)
    task: asyncio.Task | None = None
    started_wall: float = field(default_factory=time.time)
    # Told of each attempt (the last of `attempts`, with its route) before its request is sent; set by an
    # observer that needs it (tracing), None otherwise.
    on_attempt: Callable[["TurnJob", Route], None] | None = None
    summary: TurnSummary | None = None  # set once the turn settled, before the observers hear of it
    # Every deployment of the plan's pools was cooled or at a quota past the first-event timeout, and nothing
    # else could serve: the soonest one's wait, which the answer gives as Retry-After (429).
    pools_busy_ms: int | None = None
    session: str | None = None  # an agent's session header: a pool's conversation key after `options.sessionId`
    # The current attempt's first content event (loop time) and the upstream frames counted then: a pool's
    # latency estimates (time to first token, the gaps after it).
    first_token_at: float | None = None
    frames_at_first_token: int = 0
    # The client's hosted tools the current attempt's vendor is sent without (`app.providers.hosted`): once the
    # turn started, those of the provider that serves it, which the door names in `X-Gateway-Dropped-Tools`.
    dropped_tools: tuple[str, ...] = ()

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


class TurnObserver(Protocol):
    def turn_started(self, job: TurnJob) -> None: ...
    def turn_finished(self, job: TurnJob) -> None: ...


