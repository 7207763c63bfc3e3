"""Where the per-key counters live: the store protocol (`LimitStore`), what it answers (`Verdict`), the clock
periods it counts in (`Periods`) and the budget rule both stores apply (`budget_verdict`).

Two stores: `app.policy.memory_store.MemoryLimitStore` (one process) and
`app.policy.redis_store.RedisLimitStore` (`GATEWAY_REDIS_URL`, every replica sees the same counters), with the
same semantics (docs/limits.md, `app.policy.limits`).
"""

from __future__ import annotations

import calendar
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum

from app.policy.keys import KeyPolicy
from app.contract.limit_kinds import LimitKind

WINDOW_MS = 60_000
IN_FLIGHT_RETRY_MS = 1000  # a budget refused because of the turns in flight: they settle, try again soon


@dataclass(frozen=True)
class Periods:
    """The clock periods a limit counts in, for one instant (UTC)."""

    now_ms: int
    minute: int  # minutes since the epoch
    day: str  # 2026-12-03
    month: str  # 2026-12
    day_start_ms: int
    month_start_ms: int
    next_minute_ms: int
    next_day_ms: int
    next_month_ms: int

    @classmethod
    def at(cls, seconds: float) -> "Periods":
        now_ms = int(seconds * 1000)
        moment = datetime.fromtimestamp(seconds, timezone.utc)
        day_start = datetime(moment.year, moment.month, moment.day, tzinfo=timezone.utc)
        month_start = datetime(moment.year, moment.month, 1, tzinfo=timezone.utc)
        days_in_month = calendar.monthrange(moment.year, moment.month)[1]
        day_start_ms = int(day_start.timestamp() * 1000)
        month_start_ms = int(month_start.timestamp() * 1000)
        return cls(
            now_ms=now_ms,
            minute=now_ms // WINDOW_MS,
            day=day_start.strftime("%Y-%m-%d"),
            month=month_start.strftime("%Y-%m"),
            day_start_ms=day_start_ms,
            month_start_ms=month_start_ms,
            next_minute_ms=(now_ms // WINDOW_MS + 1) * WINDOW_MS,
            next_day_ms=day_start_ms + 86_400_000,
            next_month_ms=month_start_ms + days_in_month * 86_400_000,
        )


@dataclass(frozen=True)
class Verdict:
    """A store's answer to an admission: `kind` None = admitted, else the limit that refused it
    (`budget_exceeded`: spent, until the period resets; `budget_in_flight`: the rest is reserved by turns in
    flight); `need_seed` = no spend counter yet; `void` = the request id was abandoned (a late copy of its
    admission, unanswered)."""

    kind: LimitKind | None = None
    retry_after_ms: int = 0
    need_seed: bool = False
    void: bool = False


ADMITTED = Verdict()
NEED_SEED = Verdict(need_seed=True)
VOID = Verdict(void=True)


class BudgetState(StrEnum):
    """What `budget_verdict` answers."""

    OK = "ok"
    SPENT = "spent"  # refused until the period resets
    IN_FLIGHT = "in_flight"  # refused while the turns in flight hold the rest


def budget_verdict(spent: float, reserved: float, in_flight: int, estimate: float, budget: float) -> BudgetState:
    """One budget in one period. `spent`: the period's settled spend; `reserved`, `in_flight`: the estimates
    reserved by, and the number of, the key's turns in flight started in the period; `estimate`: what the
    key's latest turn cost (0: not known yet). The Redis store runs the same rule in Lua."""
    if spent >= budget:
        return BudgetState.SPENT
    if in_flight > 0 and (estimate <= 0 or spent + reserved + estimate > budget):
        return BudgetState.IN_FLIGHT
    if in_flight == 0 and spent > 0 and spent + estimate > budget:
        return BudgetState.SPENT  # what is left would not cover a turn like the latest: nothing changes that
    return BudgetState.OK


class LimitStore(ABC):
    """Where counters live. Every method is one atomic step (no read-modify-write across calls); `admit`,
    `settle` and `abandon` are idempotent per request id, so a call that timed out can be tried again."""

    @abstractmethod
    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        """Check budgets, tpm, rpm and concurrency; if all pass, count the request (rpm), take the hold (keys
        with a concurrency limit or a budget) and reserve the estimated cost (budgets). A request id already
        admitted is admitted again without counting twice; an abandoned one gets `VOID` and takes nothing."""

    @abstractmethod
    async def seed_spend(
        self, name: str, periods: Periods, day_spend: float, month_spend: float, last_cost: float = 0.0
    ) -> None:
        """Set the period's spend counters and the key's latest turn cost unless they exist (another replica
        may have seeded first)."""

    @abstractmethod
    async def settle(
        self, name: str, lease: str, tokens: int, settled: Periods, cost: float, started: Periods, marker_ttl_ms: int
    ) -> None:
        """A turn ended: release its hold and reservation; add its tokens to the minute it settled in and its
        cost to the day/month it started in (only to counters that exist: a missing one is rebuilt from the
        ledger, which has this turn). Charged once per request id (a marker kept `marker_ttl_ms`)."""

    @abstractmethod
    async def abandon(self, name: str, lease: str, now_ms: int, void_ttl_ms: int) -> None:
        """The gateway gave up on this admission: remove whatever it took (rpm entry, hold, reservation) and
        void the request id for `void_ttl_ms`, so an admission of it that runs later takes nothing."""

    @abstractmethod
    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None:
        """Extend the holds (and reservations) of the turns still running."""

    async def spent(self, name: str, periods: Periods) -> tuple[float, float]:
        """What `name` has spent in the period's day and month (0 for a counter not there yet): a plain read,
        for the budget gauge and alerts (`app.policy.limits`)."""
        return 0.0, 0.0

    @abstractmethod
    async def claim(self, marker: str, ttl_ms: int) -> bool:
        """True for the first call with `marker` (across replicas when the store is shared) within `ttl_ms`:
        a budget alert is sent once (`app.policy.budget_alerts`)."""

    async def aclose(self) -> None:
        return None
