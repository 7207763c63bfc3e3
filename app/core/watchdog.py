"""The turn's deadlines (first event, idle gap, total, first content, late-frame grace) on one timer handle."""

from __future__ import annotations

import asyncio
import enum

from app.contract.failures import Interrupt
from app.core.job import TurnJob
from app.settings import Settings


class WatchPhase(enum.Enum):
    """Where a turn is, as far as its deadlines go. Each phase names the deadlines that run in it."""

    STARTING = "starting"  # before the first attempt: total
    AWAITING_FIRST_EVENT = "awaiting first event"  # an attempt is open, no frame yet: first event, total
    STREAMING = "streaming"  # frames are coming: idle gap since the last frame, total
    PAUSED = "paused"  # waiting on a slow reader, not reading the upstream (not its silence): total
    BETWEEN_ATTEMPTS = "between attempts"  # backing off before a retry: total
    SETTLED = "settled"  # the terminal event went out: late-frame grace only


class Watchdog:
    """The turn's deadlines (first event, idle gap, total, first content, late-frame grace) on one timer handle.

    The dispatcher reports each transition (`attempt_started`, `between_attempts`, `paused`, `resumed`,
    `settled`), and each one re-arms the timer for the new phase's nearest deadline. Per upstream frame only
    a timestamp is stored (`frame`): the idle deadline only moves later, so a timer that fires early
    recomputes the deadline and re-arms itself. When a deadline passes, the job is interrupted with its
    reason (`TurnJob.interrupt`).

    The first-content deadline (`GATEWAY_FIRST_CONTENT_DEADLINE`, from the turn's creation) runs in every phase
    until the turn has started (its `start` went to the client): it bounds the retries and fallbacks before
    content, which the first-event timeout bounds one attempt at a time. Once the turn has started it no longer
    counts (a timer armed for it finds no deadline passed and re-arms for the next).
    """

    __slots__ = (
        "job",
        "settings",
        "loop",
        "created",
        "phase",
        "attempt_start",
        "first_event_timeout",
        "last_frame",
        "settled_at",
        "_handle",
    )

    def __init__(self, job: TurnJob, settings: Settings, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.job = job
        self.settings = settings
        self.loop = loop or asyncio.get_running_loop()  # its clock and timers (a test may pass a fake one)
        self.created = self.loop.time()
        self.phase = WatchPhase.STARTING
        self.attempt_start = self.created
        self.first_event_timeout = settings.first_event_timeout  # this attempt's (a pool deployment may set its own)
        self.last_frame: float | None = None
        self.settled_at: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    # ----------------------------------------------------------------- transitions

    def attempt_started(self, first_event_timeout: float | None = None) -> None:
        """An attempt starts; its first event is due within `first_event_timeout` seconds (default
        `GATEWAY_FIRST_EVENT_TIMEOUT`)."""
        self.attempt_start = self.loop.time()
        self.first_event_timeout = first_event_timeout or self.settings.first_event_timeout
        self.last_frame = None
        self._enter(WatchPhase.AWAITING_FIRST_EVENT)

    def frame(self, now: float | None = None) -> None:
        """An upstream frame arrived (at `now`, the loop's clock). The first one of an attempt starts the idle
        deadline; later ones only move it."""
        self.last_frame = self.loop.time() if now is None else now
        if self.phase is WatchPhase.AWAITING_FIRST_EVENT:
            self._enter(WatchPhase.STREAMING)

    def between_attempts(self) -> None:
        """Backing off before a retry: only the total timeout runs."""
        self._enter(WatchPhase.BETWEEN_ATTEMPTS)

    def paused(self) -> None:
        """The reader is far behind and the upstream is not being read: its silence is ours, not the vendor's.
        (After settlement only the late-frame grace runs: nothing to pause.)"""
        if self.phase is not WatchPhase.SETTLED:
            self._enter(WatchPhase.PAUSED)

    def resumed(self) -> None:
        """Reading the upstream again: the idle gap counts from now."""
        if self.phase is not WatchPhase.SETTLED:
            self.last_frame = self.loop.time()
            self._enter(WatchPhase.STREAMING)

    def settled(self) -> None:
        self.settled_at = self.loop.time()
        self._enter(WatchPhase.SETTLED)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    # ----------------------------------------------------------------- deadlines

    def deadline(self) -> tuple[float, Interrupt]:
        """The nearest deadline of the current phase (loop time) and the interrupt it fires."""
        s = self.settings
        phase = self.phase
        if phase is WatchPhase.SETTLED:
            assert self.settled_at is not None
            return self.settled_at + s.late_frame_grace, Interrupt.GRACE
        deadlines = [(self.created + s.total_timeout, Interrupt.TOTAL)]
        if s.first_content_deadline > 0 and not self.job.turn.started:
            deadlines.append((self.created + s.first_content_deadline, Interrupt.FIRST_CONTENT))
        if phase is WatchPhase.AWAITING_FIRST_EVENT:
            deadlines.append((self.attempt_start + self.first_event_timeout, Interrupt.FIRST_EVENT))
        elif phase is WatchPhase.STREAMING:
            assert self.last_frame is not None
            deadlines.append((self.last_frame + s.idle_timeout, Interrupt.IDLE))
        return min(deadlines)

    @property
    def armed_at(self) -> float | None:
        """When the timer will next look at the deadlines (loop time), None when stopped."""
        return None if self._handle is None else self._handle.when()

    def _enter(self, phase: WatchPhase) -> None:
        self.phase = phase
        self._arm()

    def _arm(self) -> None:
        self.stop()
        when, _ = self.deadline()
        self._handle = self.loop.call_at(when, self._check)

    def _check(self) -> None:
        self._handle = None
        when, reason = self.deadline()
        if self.loop.time() >= when:
            self.job.interrupt(reason)
        else:
            self._handle = self.loop.call_at(when, self._check)
