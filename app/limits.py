"""Per-key limits and spend budgets (the keys file's policies), shared by replicas through a `LimitStore`.

`Limits.admit` runs before a turn starts: the model allowance (403), then one atomic call to the store that
checks the spend budgets, tokens per minute, requests per minute and concurrent streams and, when all pass,
counts the request and takes a concurrency lease. `Limits` is also a turn observer: when a turn settles it
releases the lease and charges its tokens (usage.totalTokens) and spend (usage.cost.total).

Stores: `MemoryLimitStore` (one process) and `app.redis_limits.RedisLimitStore` (`GATEWAY_REDIS_URL`, every
replica sees the same counters). Semantics, identical in both:

- requests per minute: a sliding 60-second window of admitted requests;
- tokens per minute: tokens of the turns settled in the current clock minute (a fixed window); a key is
  refused while that minute's tokens are at or over the limit;
- concurrent streams: leases with a TTL (`GATEWAY_REDIS_LEASE_TTL`), renewed while the turn runs and
  released when it settles, so the leases of a crashed replica expire on their own;
- budgets: the spend of the turns started in the current UTC day / month; a key is refused (429
  `budget_exceeded`, `Retry-After` until the period resets) once that spend is at or over the budget, or
  once what is left would not cover another turn costing what the key's latest turn cost (a turn's cost is
  known only when it settles, so the latest one is the estimate; `over_budget`). A
  turn already running finishes and is charged, so spend can end above the budget by at most the turns in
  flight. When the store has no counter for the period (first use, or Redis restarted empty) it is rebuilt
  from the ledger (the records' usage.cost.total for the key since the period began) before admitting.

When the store fails or does not answer within `GATEWAY_REDIS_TIMEOUT`, `GATEWAY_REDIS_FAIL_OPEN` decides:
admit (default) or refuse with 503 `limits_unavailable`. Either way nothing waits longer than the timeout
(rebuilding a spend counter from the ledger, once per key and period, is bounded by SEED_TIMEOUT_S).
"""

from __future__ import annotations

import asyncio
import calendar
import logging
import math
import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Awaitable, Callable

from app.keys import ClientKeys, KeyPolicy
from app.refusals import LimitExceeded, LimitsUnavailable, ModelNotAllowed

if TYPE_CHECKING:
    from app.dispatch import TurnJob
    from app.metrics import Metrics

log = logging.getLogger("gateway.limits")

WINDOW_MS = 60_000
_PER_MINUTE = frozenset({"rate_limit_rpm", "rate_limit_tpm"})  # limits whose wait is at most one window
SEED_TIMEOUT_S = 5.0  # rebuilding a spend counter from the ledger (a flush and two sums) may take this long


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
    """A store's answer to an admission: `kind` None = admitted; `need_seed` = no spend counter yet."""

    kind: str | None = None
    retry_after_ms: int = 0
    need_seed: bool = False


ADMITTED = Verdict()
NEED_SEED = Verdict(need_seed=True)


class LimitStore(ABC):
    """Where counters live. Every method is one atomic step (no read-modify-write across calls)."""

    @abstractmethod
    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        """Check budgets, tpm, rpm and concurrency; if all pass, count the request (rpm) and take the lease."""

    @abstractmethod
    async def seed_spend(
        self, name: str, periods: Periods, day_spend: float, month_spend: float, last_cost: float = 0.0
    ) -> None:
        """Set the period's spend counters and the key's latest turn cost unless they exist (another replica
        may have seeded first)."""

    @abstractmethod
    async def charge(self, name: str, tokens: int, settled: Periods, cost: float, started: Periods) -> None:
        """Add a settled turn: tokens to the minute it settled in, cost to the day/month it started in (only
        to counters that exist: a missing one is rebuilt from the ledger, which has this turn)."""

    @abstractmethod
    async def release(self, name: str, lease: str) -> None: ...

    @abstractmethod
    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None: ...

    async def aclose(self) -> None:
        return None


def over_budget(spent: float, last_cost: float, budget: float) -> bool:
    """A budget refuses the next turn once it is spent, or once what is left would not cover another turn
    costing what the key's latest turn cost (the cost of a turn is only known when it settles)."""
    return spent >= budget or spent + last_cost > budget


class MemoryLimitStore(LimitStore):
    """The embedded store: the same rules within one process."""

    def __init__(self) -> None:
        self._requests: dict[str, deque[int]] = {}
        self._leases: dict[str, dict[str, int]] = {}
        self._tokens: dict[tuple[str, int], int] = {}
        self._spend: dict[tuple[str, str], float] = {}
        self._last_cost: dict[str, float] = {}  # what the key's latest charged turn cost

    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        now = periods.now_ms
        for budget, period, reset in (
            (policy.budget_usd_per_month, "m:" + periods.month, periods.next_month_ms),
            (policy.budget_usd_per_day, "d:" + periods.day, periods.next_day_ms),
        ):  # the month first: when both are spent, Retry-After names the later reset
            if budget > 0:
                spent = self._spend.get((name, period))
                if spent is None:
                    return NEED_SEED
                if over_budget(spent, self._last_cost.get(name, 0.0), budget):
                    return Verdict("budget_exceeded", reset - now)
        if policy.tokens_per_minute > 0 and self._tokens.get((name, periods.minute), 0) >= policy.tokens_per_minute:
            return Verdict("rate_limit_tpm", periods.next_minute_ms - now)
        requests = self._requests.setdefault(name, deque())
        if policy.requests_per_minute > 0:
            while requests and requests[0] <= now - WINDOW_MS:
                requests.popleft()
            if len(requests) >= policy.requests_per_minute:
                return Verdict("rate_limit_rpm", requests[0] + WINDOW_MS - now)
        leases = self._leases.setdefault(name, {})
        if policy.concurrent_streams > 0:
            for expired in [held for held, expiry in leases.items() if expiry <= now]:
                del leases[expired]
            if len(leases) >= policy.concurrent_streams:
                return Verdict("concurrency_limit", 1000)
            leases[lease] = now + lease_ttl_ms
        if policy.requests_per_minute > 0:
            requests.append(now)
        return ADMITTED

    async def seed_spend(
        self, name: str, periods: Periods, day_spend: float, month_spend: float, last_cost: float = 0.0
    ) -> None:
        self._last_cost.setdefault(name, last_cost)
        self._spend.setdefault((name, "d:" + periods.day), day_spend)
        self._spend.setdefault((name, "m:" + periods.month), month_spend)

    async def charge(self, name: str, tokens: int, settled: Periods, cost: float, started: Periods) -> None:
        if tokens > 0:
            self._tokens[(name, settled.minute)] = self._tokens.get((name, settled.minute), 0) + tokens
            for stale in [k for k in self._tokens if k[1] < settled.minute - 1]:
                del self._tokens[stale]
        if cost > 0:
            self._last_cost[name] = cost
            for period in ("d:" + started.day, "m:" + started.month):
                if (name, period) in self._spend:
                    self._spend[(name, period)] += cost

    async def release(self, name: str, lease: str) -> None:
        self._leases.get(name, {}).pop(lease, None)

    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None:
        for name, lease in leases:
            held = self._leases.get(name, {})
            if lease in held:
                held[lease] = now_ms + lease_ttl_ms


LedgerSpend = Callable[[str, int], Awaitable[float]]  # (key name, since epoch ms) → USD spent
LedgerLastCost = Callable[[str], Awaitable[float]]  # key name → USD cost of its latest settled turn


async def _no_last_cost(key_id: str) -> float:
    return 0.0


class Limits:
    """Admission by key policy, and the turn observer that charges settled turns."""

    def __init__(
        self,
        keys: ClientKeys,
        store: LimitStore,
        ledger_spend: LedgerSpend,
        *,
        ledger_last_cost: LedgerLastCost = _no_last_cost,
        fail_open: bool = True,
        timeout: float = 0.25,
        lease_ttl: float = 30.0,
        metrics: "Metrics | None" = None,
    ) -> None:
        self.keys = keys
        self.store = store
        self.ledger_spend = ledger_spend
        self.ledger_last_cost = ledger_last_cost
        self.fail_open = fail_open
        self.timeout = timeout
        self.lease_ttl_ms = int(lease_ttl * 1000)
        self.metrics = metrics
        self.leases: dict[str, str] = {}  # request id → key name, for the turns holding a concurrency lease
        self._background: set[asyncio.Task] = set()
        self._renewer: asyncio.Task | None = None

    # ------------------------------------------------------------------ admission

    async def admit(self, key_id: str | None, refs: list[str], request_id: str) -> None:
        """Raise a Refusal when the key may not start this turn now; otherwise count it (and take a lease)."""
        if key_id is None:
            return
        policy = self.keys.policy(key_id)
        for index, ref in enumerate(refs):
            if not policy.allows_model(ref):
                self._rejected("model_not_allowed")
                param = "model" if index == 0 else f"fallback.{index - 1}"
                raise ModelNotAllowed(f"API key {key_id} may not use model {ref}", param=param)
        if not (policy.requests_per_minute or policy.tokens_per_minute or policy.concurrent_streams or policy.has_budget):
            return
        try:
            verdict = await self._admit(key_id, policy, request_id)
        except Exception as exc:  # the store is down, slow or broken
            self._store_failed("admit", exc)
            if self.fail_open:
                return
            self._rejected("limits_unavailable")
            raise LimitsUnavailable("per-key limits cannot be checked right now (limit store unavailable)") from None
        if verdict.kind is not None:
            self._rejected(verdict.kind)
            wait_ms = max(verdict.retry_after_ms, 0)
            if verdict.kind in _PER_MINUTE:  # another replica's clock may run a few ms ahead of ours
                wait_ms = min(wait_ms, WINDOW_MS)
            retry_after = math.ceil(wait_ms / 1000)
            raise LimitExceeded(_describe(verdict.kind, key_id, policy), verdict.kind, retry_after)
        if policy.concurrent_streams:
            self.leases[request_id] = key_id

    async def admit_stream(self, key_id: str | None, lease: str, *, alongside_turn: bool) -> None:
        """A resumption: a stream that starts no turn, so it counts against the key's concurrent streams only
        (no rpm, tpm or budget), with a lease of its own (`lease`, released by `release_stream`).
        `alongside_turn`: the turn it reads still runs and holds a lease, which this one does not count."""
        if key_id is None:
            return
        policy = self.keys.policy(key_id)
        if not policy.concurrent_streams:
            return
        streams_only = KeyPolicy(concurrent_streams=policy.concurrent_streams + int(alongside_turn))
        try:
            verdict = await self._bounded(
                self.store.admit(key_id, streams_only, lease, Periods.at(time.time()), self.lease_ttl_ms)
            )
        except Exception as exc:
            self._store_failed("admit", exc)
            if self.fail_open:
                return
            self._rejected("limits_unavailable")
            raise LimitsUnavailable("per-key limits cannot be checked right now (limit store unavailable)") from None
        if verdict.kind is not None:
            self._rejected(verdict.kind)
            raise LimitExceeded(_describe(verdict.kind, key_id, policy), verdict.kind, math.ceil(verdict.retry_after_ms / 1000))
        self.leases[lease] = key_id

    def release_stream(self, lease: str) -> None:
        """A resumption admitted by `admit_stream` ended."""
        key_id = self.leases.pop(lease, None)
        if key_id is not None:
            self._spawn(self._settle(key_id, lease, True, 0, 0.0, Periods.at(time.time())))

    async def _admit(self, key_id: str, policy: KeyPolicy, request_id: str) -> Verdict:
        periods = Periods.at(time.time())
        verdict = await self._bounded(self.store.admit(key_id, policy, request_id, periods, self.lease_ttl_ms))
        if verdict.need_seed:
            day, month, last = await asyncio.wait_for(
                asyncio.gather(
                    self.ledger_spend(key_id, periods.day_start_ms),
                    self.ledger_spend(key_id, periods.month_start_ms),
                    self.ledger_last_cost(key_id),
                ),
                SEED_TIMEOUT_S,
            )
            await self._bounded(self.store.seed_spend(key_id, periods, day, month, last))
            log.info("spend of key %s rebuilt from the ledger: %.6f USD today, %.6f this month", key_id, day, month)
            verdict = await self._bounded(self.store.admit(key_id, policy, request_id, periods, self.lease_ttl_ms))
            if verdict.need_seed:
                raise RuntimeError("spend counters missing right after seeding")
        return verdict

    async def _bounded(self, awaitable: Awaitable) -> object:
        return await asyncio.wait_for(awaitable, self.timeout)

    # ------------------------------------------------------------------ turn observer

    def turn_started(self, job: "TurnJob") -> None:
        pass

    def turn_finished(self, job: "TurnJob") -> None:
        key_id = job.api_key_id
        if key_id is None:
            return
        request_id = job.turn.request_id
        usage = job.turn.message.get("usage") or {}
        tokens = int(usage.get("totalTokens") or 0)
        cost = float((usage.get("cost") or {}).get("total") or 0)
        if self.metrics is not None and cost > 0:
            self.metrics.key_spend(key_id, cost)
        policy = self.keys.policy(key_id)
        leased = self.leases.pop(request_id, None) is not None
        charge = (policy.tokens_per_minute and tokens > 0) or (policy.has_budget and cost > 0)
        if leased or charge:
            started = Periods.at(job.started_wall)
            self._spawn(self._settle(key_id, request_id, leased, tokens if charge else 0, cost if charge else 0.0, started))

    async def _settle(self, key_id: str, request_id: str, leased: bool, tokens: int, cost: float, started: Periods) -> None:
        try:
            if leased:
                await self._bounded(self.store.release(key_id, request_id))
            if tokens or cost:
                await self._bounded(self.store.charge(key_id, tokens, Periods.at(time.time()), cost, started))
        except Exception as exc:
            self._store_failed("charge", exc)

    def _spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def idle(self) -> None:
        """Wait until the releases and charges of settled turns have reached the store (tests, shutdown)."""
        while self._background:
            await asyncio.wait(set(self._background))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._renewer = asyncio.create_task(self._renew_leases(), name="limits-lease-renewer")

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease_ttl_ms / 3000)
            if not self.leases:
                continue
            try:
                leases = [(key, request) for request, key in self.leases.items()]
                await self._bounded(self.store.renew(leases, int(time.time() * 1000), self.lease_ttl_ms))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._store_failed("renew", exc)

    async def aclose(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        if self._background:
            await asyncio.wait(set(self._background), timeout=self.timeout * 4)
        await self.store.aclose()

    # ------------------------------------------------------------------ helpers

    def _rejected(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.rejected_request(kind)

    def _store_failed(self, operation: str, exc: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.limit_store_error(operation)
        log.warning(
            "limit store %s failed (%s); failing %s", operation, type(exc).__name__, "open" if self.fail_open else "closed"
        )


def _describe(kind: str, key_id: str, policy: KeyPolicy) -> str:
    if kind == "rate_limit_rpm":
        return f"API key {key_id}: requests per minute limit reached (limit {policy.requests_per_minute})"
    if kind == "rate_limit_tpm":
        return f"API key {key_id}: tokens per minute limit reached (limit {policy.tokens_per_minute})"
    if kind == "concurrency_limit":
        return f"API key {key_id}: concurrent streams limit reached (limit {policy.concurrent_streams})"
    if kind == "budget_exceeded":
        budgets = []
        if policy.budget_usd_per_day:
            budgets.append(f"{policy.budget_usd_per_day:g} USD per day")
        if policy.budget_usd_per_month:
            budgets.append(f"{policy.budget_usd_per_month:g} USD per month")
        return f"API key {key_id}: spend budget exhausted ({', '.join(budgets)}) until the period resets"
    return f"API key {key_id}: limit reached ({kind})"
