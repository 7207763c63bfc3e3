"""Per-key limits and spend budgets (the keys file's policies), shared by replicas through a `LimitStore`.

`Limits.admit` runs before a turn starts: the model allowance (403), then one atomic call to the store that
checks the spend budgets, tokens per minute, requests per minute and concurrent streams and, when all pass,
counts the request and takes what the turn holds while it runs: a *hold* (keys with a concurrency limit or a
budget) and, for budgeted keys, a *reservation* of its estimated cost. `Limits` is also a turn observer: when
a turn settles it releases the hold and the reservation and charges the turn's tokens (usage.totalTokens)
and spend (usage.cost.total), in one idempotent call (`LimitStore.settle`).

Stores: `MemoryLimitStore` (one process) and `app.redis_limits.RedisLimitStore` (`GATEWAY_REDIS_URL`, every
replica sees the same counters). Semantics, identical in both:

- requests per minute: a sliding 60-second window of admitted requests;
- tokens per minute: tokens of the turns settled in the current clock minute (a fixed window); a key is
  refused while that minute's tokens are at or over the limit;
- concurrent streams: the key's holds, which have a TTL (`GATEWAY_REDIS_LEASE_TTL`), are renewed while the
  turn runs and released when it settles, so the holds of a crashed replica expire on their own;
- budgets (`budget_verdict`): the spend of the turns started in the current UTC day / month, and the
  reservations of the key's turns in flight. A turn's cost is known only when it settles, so the key's latest
  turn cost is the estimate of the next one, and each admitted turn reserves that estimate until it settles.
  A period with nothing spent and nothing in flight admits a turn whatever the estimate; otherwise the key is
  refused once the spend is at or over the budget or what is left would not cover one more turn like the
  latest (429 `budget_exceeded`, `Retry-After` until the period resets), and while turns are in flight, when
  their reservations leave no room for one more estimate or no estimate is known yet (one turn at a time until
  a turn of the key has a cost; `Retry-After` 1 s, the turns in flight settle). Spend ends above the budget by
  at most what the turns in flight cost beyond their estimates (docs/replicas.md gives the bound). When the
  store has no counter for the period (first use, or Redis restarted empty) it is rebuilt from the ledger (the
  records' usage.cost.total for the key since the period began) before admitting.

When the store fails or does not answer within `GATEWAY_REDIS_TIMEOUT`, `GATEWAY_REDIS_FAIL_OPEN` decides:
admit (default) or refuse with 503 `limits_unavailable`. Either way nothing waits longer than the timeout
(rebuilding a spend counter from the ledger, once per key and period, is bounded by SEED_TIMEOUT_S). An
admission the gateway gave up on (failed, timed out, or its request went away) leaves no trace: `abandon`
removes what it took and voids its request id, so a copy of it that Redis runs later (queued on a stalled
server) takes nothing. `abandon` and `settle` are retried in the background until the store answers or what
they would undo has expired by itself (`Limits.retry_window_ms`).
"""

from __future__ import annotations

import asyncio
import calendar
import itertools
import logging
import math
import time
from abc import ABC, abstractmethod
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
IN_FLIGHT_RETRY_MS = 1000  # a budget refused because of the turns in flight: they settle, try again soon
RETRY_MAX_DELAY_S = 1.0  # the longest pause between two tries of a background settle or abandon


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
    """A store's answer to an admission: `kind` None = admitted; `need_seed` = no spend counter yet.

    Refusal kinds: `rate_limit_rpm`, `rate_limit_tpm`, `concurrency_limit`, `budget_exceeded` (spent: until
    the period resets), `budget_in_flight` (the rest is reserved by turns in flight; answered as
    `budget_exceeded`) and `void` (the request id was abandoned: a late copy of its admission, unanswered)."""

    kind: str | None = None
    retry_after_ms: int = 0
    need_seed: bool = False


ADMITTED = Verdict()
NEED_SEED = Verdict(need_seed=True)
VOID = Verdict("void")


class BudgetState:
    """What `budget_verdict` answers."""

    OK = "ok"
    SPENT = "spent"  # refused until the period resets
    IN_FLIGHT = "in_flight"  # refused while the turns in flight hold the rest


def budget_verdict(spent: float, reserved: float, in_flight: int, estimate: float, budget: float) -> str:
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

    async def aclose(self) -> None:
        return None


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
        self._settled: dict[str, int] = {}  # charged request id → until when that is remembered

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
                return Verdict("budget_exceeded", spent_until - now)
            if in_flight:
                return Verdict("budget_in_flight", IN_FLIGHT_RETRY_MS)
        if policy.tokens_per_minute > 0 and self._tokens.get((name, periods.minute), 0) >= policy.tokens_per_minute:
            return Verdict("rate_limit_tpm", periods.next_minute_ms - now)
        if policy.requests_per_minute > 0:
            for old in [held for held, at in requests.items() if at <= now - WINDOW_MS]:
                del requests[old]
            if len(requests) >= policy.requests_per_minute:
                return Verdict("rate_limit_rpm", min(requests.values()) + WINDOW_MS - now)
        if policy.concurrent_streams > 0:
            _expire(leases, now)
            if len(leases) >= policy.concurrent_streams:
                return Verdict("concurrency_limit", 1000)
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
        if (tokens > 0 or cost > 0) and self._settled.get(lease, now) <= now:
            self._settled[lease] = now + marker_ttl_ms
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


LedgerSpend = Callable[[str, int], Awaitable[float]]  # (key name, since epoch ms) → USD spent
LedgerLastCost = Callable[[str], Awaitable[float]]  # key name → USD cost of its latest settled turn


async def _no_last_cost(key_id: str) -> float:
    return 0.0


class Limits:
    """Admission by key policy, and the turn observer that settles turns with the store."""

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
        # After this long, whatever an admission took has expired by itself (rpm entries leave the window,
        # holds their TTL): a background settle or abandon stops trying; voids and charge markers outlive it.
        self.retry_window_ms = max(WINDOW_MS, self.lease_ttl_ms)
        self.metrics = metrics
        self.leases: dict[str, str] = {}  # request id → key name, for the turns holding a hold in the store
        self._background: set[asyncio.Task] = set()
        self._renewer: asyncio.Task | None = None

    # ------------------------------------------------------------------ admission

    async def admit(self, key_id: str | None, refs: list[str], request_id: str) -> None:
        """Raise a Refusal when the key may not start this turn now; otherwise count it (and take a hold)."""
        if key_id is None:
            return
        self.check_models(key_id, refs)
        policy = self.keys.policy(key_id)
        if not (policy.requests_per_minute or policy.tokens_per_minute or policy.concurrent_streams or policy.has_budget):
            return
        try:
            verdict = await self._admit(key_id, policy, request_id)
        except asyncio.CancelledError:  # the request went away while the store was being asked
            self._abandon(key_id, request_id)
            raise
        except Exception as exc:  # the store is down, slow or broken
            self._unavailable(key_id, request_id, exc)
            return
        if verdict.kind is not None:
            kind = "budget_exceeded" if verdict.kind == "budget_in_flight" else verdict.kind
            self._rejected(kind)
            wait_ms = max(verdict.retry_after_ms, 0)
            if verdict.kind in _PER_MINUTE:  # another replica's clock may run a few ms ahead of ours
                wait_ms = min(wait_ms, WINDOW_MS)
            retry_after = math.ceil(wait_ms / 1000)
            raise LimitExceeded(_describe(verdict.kind, key_id, policy), kind, retry_after)
        if policy.concurrent_streams or policy.has_budget:
            self.leases[request_id] = key_id

    def _unavailable(self, key_id: str, lease: str, exc: BaseException) -> None:
        """The store could not answer an admission: undo whatever it may have taken, then admit without limits
        (fail-open: return) or raise LimitsUnavailable (fail-closed)."""
        self._abandon(key_id, lease)
        self._store_failed("admit", exc)
        if not self.fail_open:
            self._rejected("limits_unavailable")
            raise LimitsUnavailable("per-key limits cannot be checked right now (limit store unavailable)") from None

    def check_models(self, key_id: str | None, refs: list[str]) -> None:
        """Raise ModelNotAllowed (naming the field) when the key's policy does not allow one of `refs` (the
        request's model, then its fallbacks). Counts nothing: token counts are checked with this alone."""
        if key_id is None:
            return
        policy = self.keys.policy(key_id)
        for index, ref in enumerate(refs):
            if not policy.allows_model(ref):
                self._rejected("model_not_allowed")
                param = "model" if index == 0 else f"fallback.{index - 1}"
                raise ModelNotAllowed(f"API key {key_id} may not use model {ref}", param=param)

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
        except asyncio.CancelledError:
            self._abandon(key_id, lease)
            raise
        except Exception as exc:
            self._unavailable(key_id, lease, exc)
            return
        if verdict.kind is not None:
            self._rejected(verdict.kind)
            raise LimitExceeded(_describe(verdict.kind, key_id, policy), verdict.kind, math.ceil(verdict.retry_after_ms / 1000))
        self.leases[lease] = key_id

    def release_stream(self, lease: str) -> None:
        """A resumption admitted by `admit_stream` ended."""
        key_id = self.leases.pop(lease, None)
        if key_id is not None:
            now = Periods.at(time.time())
            marker_ttl_ms = 2 * self.retry_window_ms
            self._spawn(
                self._persist("release", lambda: self.store.settle(key_id, lease, 0, now, 0.0, now, marker_ttl_ms))
            )

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
        if verdict == VOID:
            raise RuntimeError("admission of an abandoned request id")
        return verdict

    async def _bounded(self, awaitable: Awaitable) -> object:
        return await asyncio.wait_for(awaitable, self.timeout)

    def _abandon(self, key_id: str, request_id: str) -> None:
        """Undo, in the background, whatever an admission the gateway gave up on may have taken (now or when a
        stalled Redis runs it later)."""
        void_ttl_ms = 2 * self.retry_window_ms
        self._spawn(
            self._persist("abandon", lambda: self.store.abandon(key_id, request_id, int(time.time() * 1000), void_ttl_ms))
        )

    async def _persist(self, operation: str, attempt: Callable[[], Awaitable]) -> None:
        """Call the store until it answers (each try bounded by the timeout), for at most `retry_window_ms`."""
        give_up_at = time.monotonic() + self.retry_window_ms / 1000
        delay = 0.05
        for tries in itertools.count(1):
            try:
                await self._bounded(attempt())
                if tries > 1:
                    log.info("limit store %s done after %d tries", operation, tries)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if tries == 1:
                    self._store_failed(operation, exc)
                elif self.metrics is not None:
                    self.metrics.limit_store_error(operation)
                if time.monotonic() + delay >= give_up_at:
                    log.warning("limit store %s given up after %d tries (what it held has expired)", operation, tries)
                    return
                await asyncio.sleep(delay)  # a pause between tries of a store that did not answer
                delay = min(delay * 2, RETRY_MAX_DELAY_S)

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
        held = self.leases.pop(request_id, None) is not None
        charge = (policy.tokens_per_minute and tokens > 0) or (policy.has_budget and cost > 0)
        if held or charge:
            started = Periods.at(job.started_wall)
            settled = Periods.at(time.time())
            tokens, cost = (tokens, cost) if charge else (0, 0.0)
            marker_ttl_ms = 2 * self.retry_window_ms

            def attempt() -> Awaitable:
                return self.store.settle(key_id, request_id, tokens, settled, cost, started, marker_ttl_ms)

            self._spawn(self._persist("charge", attempt))

    def _spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def idle(self) -> None:
        """Wait until the settles and abandons in the background are done (tests, shutdown)."""
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
            _, unfinished = await asyncio.wait(set(self._background), timeout=self.timeout * 4)
            for task in unfinished:  # the store does not answer: what they hold expires on its own
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
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
    if kind in ("budget_exceeded", "budget_in_flight"):
        budgets = []
        if policy.budget_usd_per_day:
            budgets.append(f"{policy.budget_usd_per_day:g} USD per day")
        if policy.budget_usd_per_month:
            budgets.append(f"{policy.budget_usd_per_month:g} USD per month")
        if kind == "budget_in_flight":
            return (
                f"API key {key_id}: the rest of the spend budget ({', '.join(budgets)}) is reserved by turns in "
                "flight; retry when they have finished"
            )
        return f"API key {key_id}: spend budget exhausted ({', '.join(budgets)}) until the period resets"
    return f"API key {key_id}: limit reached ({kind})"
