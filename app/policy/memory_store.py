"""The embedded limit store: the counters of one process, with the rules of `app.policy.store.LimitStore`."""

from __future__ import annotations

from app.policy.keys import KeyPolicy
from app.contract.limit_kinds import LimitKind
from app.policy.store import (
    ADMITTED,
    IN_FLIGHT_RETRY_MS,
    NEED_SEED,
    VOID,
    WINDOW_MS,
    BudgetState,
    LimitStore,
    Periods,
    Verdict,
    budget_verdict,
)


class MemoryLimitStore(LimitStore):
    """The embedded store: the same rules within one process."""

    def __init__(self) -> None:
        self._requests: dict[str, dict[str, int]] = {}  # key → admitted request id → time (the rpm window)
        self._leases: dict[str, dict[str, int]] = {}  # key → held request id → expiry
        self._reserved: dict[str, dict[str, tuple[float, str, str]]] = {}  # key → request id → (USD, day, month)
        self._tokens: dict[tuple[str, int], int] = {}
        self._spend: dict[tuple[str, str], float] = {}
        self._last_cost: dict[str, float] = {}  # what the key's latest charged turn cost
        self._void: dict[str, int] = {}  # abandoned request id → until when an admission of it is void
        # "<subject> <request id>" charged → until when that is remembered (a turn charges its key, its team and
        # its end user, each once)
        self._settled: dict[str, int] = {}
        self._claimed: set[str] = set()  # markers of `claim` (a process lives less than a claim's TTL)

    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        now = periods.now_ms
        if self._void.get(lease, now) > now:
            return VOID
        requests = self._requests.setdefault(name, {})
        leases = self._leases.setdefault(name, {})
        if lease in leases or lease in requests:
            return ADMITTED  # the same admission again: counted once
        reserved = self._reserved.setdefault(name, {})
        if policy.has_budget:
            budgets = (  # the month first: when both are spent, Retry-After names the later reset
                (policy.budget_usd_per_month, "m:" + periods.month, periods.next_month_ms),
                (policy.budget_usd_per_day, "d:" + periods.day, periods.next_day_ms),
            )
            if any(budget > 0 and (name, period) not in self._spend for budget, period, _ in budgets):
                return NEED_SEED
            _expire(leases, now)
            for stale in [held for held in reserved if held not in leases]:
                del reserved[stale]
            estimate = self._last_cost.get(name, 0.0)
            spent_until, in_flight = None, False
            for budget, period, reset in budgets:
                if budget > 0:
                    mine = [usd for usd, day, month in reserved.values() if period in ("d:" + day, "m:" + month)]
                    state = budget_verdict(self._spend[(name, period)], sum(mine), len(mine), estimate, budget)
                    if state == BudgetState.SPENT and spent_until is None:
                        spent_until = reset
                    in_flight = in_flight or state == BudgetState.IN_FLIGHT
            if spent_until is not None:
                return Verdict(LimitKind.BUDGET_EXCEEDED, spent_until - now)
            if in_flight:
                return Verdict(LimitKind.BUDGET_IN_FLIGHT, IN_FLIGHT_RETRY_MS)
        if policy.tokens_per_minute > 0 and self._tokens.get((name, periods.minute), 0) >= policy.tokens_per_minute:
            return Verdict(LimitKind.RATE_LIMIT_TPM, periods.next_minute_ms - now)
        if policy.requests_per_minute > 0:
            for old in [held for held, at in requests.items() if at <= now - WINDOW_MS]:
                del requests[old]
            if len(requests) >= policy.requests_per_minute:
                return Verdict(LimitKind.RATE_LIMIT_RPM, min(requests.values()) + WINDOW_MS - now)
        if policy.concurrent_streams > 0:
            _expire(leases, now)
            if len(leases) >= policy.concurrent_streams:
                return Verdict(LimitKind.CONCURRENCY_LIMIT, 1000)
        if policy.concurrent_streams > 0 or policy.has_budget:
            leases[lease] = now + lease_ttl_ms
        if policy.has_budget:
            reserved[lease] = (self._last_cost.get(name, 0.0), periods.day, periods.month)
        if policy.requests_per_minute > 0:
            requests[lease] = now
        return ADMITTED

    async def seed_spend(
        self, name: str, periods: Periods, day_spend: float, month_spend: float, last_cost: float = 0.0
    ) -> None:
        self._last_cost.setdefault(name, last_cost)
        self._spend.setdefault((name, "d:" + periods.day), day_spend)
        self._spend.setdefault((name, "m:" + periods.month), month_spend)

    async def settle(
        self, name: str, lease: str, tokens: int, settled: Periods, cost: float, started: Periods, marker_ttl_ms: int
    ) -> None:
        now = settled.now_ms
        charged = f"{name} {lease}"
        if (tokens > 0 or cost > 0) and self._settled.get(charged, now) <= now:
            self._settled[charged] = now + marker_ttl_ms
            _expire(self._settled, now, at_least=1024)
            if tokens > 0:
                self._tokens[(name, settled.minute)] = self._tokens.get((name, settled.minute), 0) + tokens
                for stale in [k for k in self._tokens if k[1] < settled.minute - 1]:
                    del self._tokens[stale]
            if cost > 0:
                self._last_cost[name] = cost
                for period in ("d:" + started.day, "m:" + started.month):
                    if (name, period) in self._spend:
                        self._spend[(name, period)] += cost
        self._leases.get(name, {}).pop(lease, None)
        self._reserved.get(name, {}).pop(lease, None)

    async def spent(self, name: str, periods: Periods) -> tuple[float, float]:
        return self._spend.get((name, "d:" + periods.day), 0.0), self._spend.get((name, "m:" + periods.month), 0.0)

    async def claim(self, marker: str, ttl_ms: int) -> bool:
        if marker in self._claimed:
            return False
        self._claimed.add(marker)
        return True

    async def abandon(self, name: str, lease: str, now_ms: int, void_ttl_ms: int) -> None:
        self._void[lease] = now_ms + void_ttl_ms
        _expire(self._void, now_ms, at_least=1024)
        for taken in (self._requests, self._leases, self._reserved):
            taken.get(name, {}).pop(lease, None)

    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None:
        for name, lease in leases:
            held = self._leases.get(name, {})
            if lease in held:
                held[lease] = now_ms + lease_ttl_ms


def _expire(entries: dict[str, int], now_ms: int, at_least: int = 0) -> None:
    """Drop the entries whose expiry has passed (only once there are `at_least` entries)."""
    if len(entries) >= at_least:
        for expired in [entry for entry, expiry in entries.items() if expiry <= now_ms]:
            del entries[expired]
