"""Per-key limits and spend budgets (the keys file's policies), shared by replicas through a `LimitStore`.

`Limits.admit` is the last step of admission (`app.policy.admission`): the model allowance (403), then one
atomic call to the store that checks the spend budgets, tokens per minute, requests per minute and concurrent
streams and, when all pass, counts the request and takes what the turn holds while it runs: a *hold* (keys
with a concurrency limit or a budget) and, for budgeted keys, a *reservation* of its estimated cost. `Limits` is also a turn observer: when
a turn settles it releases the hold and the reservation and charges the turn's tokens (usage.totalTokens)
and spend (usage.cost.total), in one idempotent call (`LimitStore.settle`).

Stores (`app.policy.store.LimitStore`): `MemoryLimitStore` (one process) and `RedisLimitStore`
(`GATEWAY_REDIS_URL`, every replica sees the same counters). Semantics, identical in both:

- requests per minute: a sliding 60-second window of admitted requests;
- tokens per minute: tokens of the turns settled in the current clock minute (a fixed window); a key is
  refused while that minute's tokens are at or over the limit;
- concurrent streams (the key's own `concurrent_streams`; without one, `GATEWAY_MAX_STREAMS_PER_KEY` caps the
  key per replica instead, `app.policy.admission`): the key's holds, which have a TTL (`GATEWAY_REDIS_LEASE_TTL`), are renewed while the
  turn runs and released when it settles, so the holds of a crashed replica expire on their own;
- budgets (`app.policy.store.budget_verdict`): the spend of the turns started in the current UTC day / month, and the
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
import itertools
import logging
import math
import time
from typing import TYPE_CHECKING, Awaitable, Callable, TypeVar

from app.policy.budget_alerts import BudgetAlerts
from app.policy.keys import TEAM_SUBJECT, ClientKeys, KeyPolicy, user_subject
from app.contract.limit_kinds import LimitKind, Rejection
from app.policy.store import WINDOW_MS, LimitStore, Periods, Verdict
from app.redis_client import raise_dropped_cancellation
from app.contract.refusals import LimitExceeded, LimitsUnavailable, ModelNotAllowed
from app.core.job import TurnObserver

if TYPE_CHECKING:
    from app.core.job import TurnJob
    from app.core.settled import SettledTurn
    from app.telemetry.metrics import Metrics

log = logging.getLogger("gateway.limits")

T = TypeVar("T")

SEED_TIMEOUT_S = 5.0  # rebuilding a spend counter from the ledger (a flush and two sums) may take this long
RETRY_MAX_DELAY_S = 1.0  # the longest pause between two tries of a background settle or abandon


LedgerSpend = Callable[[str, int], Awaitable[float]]  # (key name, since epoch ms) → USD spent
LedgerLastCost = Callable[[str], Awaitable[float]]  # key name → USD cost of its latest settled turn


async def _no_last_cost(key_id: str) -> float:
    return 0.0


class Limits(TurnObserver):
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
        alerts: BudgetAlerts | None = None,
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
        self.alerts = alerts  # the budget webhook (`GATEWAY_BUDGET_WEBHOOK_URL`), when set
        self.leases: dict[str, str] = {}  # request id → key name, for the turns holding a hold in the store
        self.team_leases: dict[str, str] = {}  # request id → team subject, for the turns holding a team's hold
        self.user_leases: dict[str, str] = {}  # request id → end user subject, for the turns holding a user's hold
        self._background: set[asyncio.Future[None]] = set()
        self._renewer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ admission

    async def admit(self, key_id: str | None, refs: list[str], request_id: str, user: str | None = None) -> None:
        """Raise a Refusal when the key may not start this turn now; otherwise count it (and take a hold).
        `user`: the turn's end user (attribution), counted against the key's per-user budget if it has one."""
        if key_id is None:
            return
        self.check_models(key_id, refs)
        policy = self.keys.policy(key_id)
        if not (
            policy.requests_per_minute or policy.tokens_per_minute or policy.concurrent_streams or policy.has_budget
        ):
            await self._admit_team(key_id, request_id)
            await self._admit_user(key_id, policy, user, request_id)
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
            kind = verdict.kind.answered_as
            self._rejected(kind)
            wait_ms = max(verdict.retry_after_ms, 0)
            if verdict.kind.per_minute:  # another replica's clock may run a few ms ahead of ours
                wait_ms = min(wait_ms, WINDOW_MS)
            retry_after = math.ceil(wait_ms / 1000)
            raise LimitExceeded(_describe(verdict.kind, key_id, policy), kind, retry_after)
        if policy.concurrent_streams or policy.has_budget:
            self.leases[request_id] = key_id
        await self._admit_team(key_id, request_id)
        await self._admit_user(key_id, policy, user, request_id)

    async def _admit_user(self, key_id: str, policy: KeyPolicy, user: str | None, request_id: str) -> None:
        """The end user's own budget among the key's turns (`user_subject`), counted like a team's; a refusal
        undoes what the key's and its team's admissions took."""
        scoped = user_subject(key_id, policy, user)
        if scoped is None:
            return
        subject, budgets = scoped

        def undo() -> None:
            self._undo_key(key_id, request_id)
            team = self.team_leases.pop(request_id, None)
            if team is not None:
                self._abandon(team, request_id)

        try:
            verdict = await self._admit(subject, budgets, request_id)
        except asyncio.CancelledError:
            self._abandon(subject, request_id)
            undo()
            raise
        except Exception as exc:
            try:
                self._unavailable(subject, request_id, exc)
            except LimitsUnavailable:
                undo()
                raise
            return
        if verdict.kind is not None:
            undo()
            kind = verdict.kind.answered_as
            self._rejected(kind)
            raise LimitExceeded(
                _describe(verdict.kind, subject, budgets), kind, math.ceil(verdict.retry_after_ms / 1000)
            )
        self.user_leases[request_id] = subject

    async def _admit_team(self, key_id: str, request_id: str) -> None:
        """The key's team's shared limits and budgets (`ClientKeys.team_policy`), counted under the team's
        subject exactly as a key's; a refusal undoes what the key's own admission took."""
        team = self.keys.team_policy(key_id)
        if team is None:
            return
        subject, policy = team
        try:
            verdict = await self._admit(subject, policy, request_id)
        except asyncio.CancelledError:
            self._abandon(subject, request_id)
            self._undo_key(key_id, request_id)
            raise
        except Exception as exc:
            try:
                self._unavailable(subject, request_id, exc)
            except LimitsUnavailable:
                self._undo_key(key_id, request_id)
                raise
            return
        if verdict.kind is not None:
            self._undo_key(key_id, request_id)
            kind = verdict.kind.answered_as
            self._rejected(kind)
            wait_ms = max(verdict.retry_after_ms, 0)
            if verdict.kind.per_minute:
                wait_ms = min(wait_ms, WINDOW_MS)
            raise LimitExceeded(_describe(verdict.kind, subject, policy), kind, math.ceil(wait_ms / 1000))
        if policy.concurrent_streams or policy.has_budget:
            self.team_leases[request_id] = subject

    def _undo_key(self, key_id: str, request_id: str) -> None:
        """The key's own admission of a turn its team refused: release and void it."""
        self.leases.pop(request_id, None)
        self._abandon(key_id, request_id)

    def _unavailable(self, key_id: str, lease: str, exc: BaseException) -> None:
        """The store could not answer an admission: undo whatever it may have taken, then admit without limits
        (fail-open: return) or raise LimitsUnavailable (fail-closed)."""
        self._abandon(key_id, lease)
        self._store_failed("admit", exc)
        if not self.fail_open:
            self._rejected(Rejection.LIMITS_UNAVAILABLE)
            raise LimitsUnavailable("per-key limits cannot be checked right now (limit store unavailable)") from None

    def check_models(self, key_id: str | None, refs: list[str]) -> None:
        """Raise ModelNotAllowed (naming the field) when the key's policy does not allow one of `refs` (the
        request's model, then its fallbacks). Counts nothing: token counts are checked with this alone."""
        if key_id is None:
            return
        policy = self.keys.policy(key_id)
        for index, ref in enumerate(refs):
            if not policy.allows_model(ref):
                self._rejected(Rejection.MODEL_NOT_ALLOWED)
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
            raise LimitExceeded(
                _describe(verdict.kind, key_id, policy), verdict.kind, math.ceil(verdict.retry_after_ms / 1000)
            )
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
            async with asyncio.timeout(SEED_TIMEOUT_S):
                day, month, last = await asyncio.gather(
                    self.ledger_spend(key_id, periods.day_start_ms),
                    self.ledger_spend(key_id, periods.month_start_ms),
                    self.ledger_last_cost(key_id),
                )
            await self._bounded(self.store.seed_spend(key_id, periods, day, month, last))
            log.info("spend of key %s rebuilt from the ledger: %.6f USD today, %.6f this month", key_id, day, month)
            verdict = await self._bounded(self.store.admit(key_id, policy, request_id, periods, self.lease_ttl_ms))
            if verdict.need_seed:
                raise RuntimeError("spend counters missing right after seeding")
        if verdict.void:
            raise RuntimeError("admission of an abandoned request id")
        return verdict

    async def _bounded(self, awaitable: Awaitable[T]) -> T:
        async with asyncio.timeout(self.timeout):
            return await awaitable

    def _abandon(self, key_id: str, request_id: str) -> None:
        """Undo, in the background, whatever an admission the gateway gave up on may have taken (now or when a
        stalled Redis runs it later)."""
        void_ttl_ms = 2 * self.retry_window_ms
        self._spawn(
            self._persist(
                "abandon", lambda: self.store.abandon(key_id, request_id, int(time.time() * 1000), void_ttl_ms)
            )
        )

    async def _persist(self, operation: str, attempt: Callable[[], Awaitable[object]]) -> None:
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

    def turn_finished(self, job: "TurnJob", settled: "SettledTurn") -> None:
        key_id = job.request.api_key_id
        if key_id is None:
            return
        request_id = settled.request_id
        usage = settled.message.get("usage") or {}
        tokens = int(usage.get("totalTokens") or 0)
        cost = float((usage.get("cost") or {}).get("total") or 0)
        if self.metrics is not None and cost > 0:
            self.metrics.key_spend(key_id, cost)
        self._settle(key_id, self.keys.policy(key_id), request_id, settled, tokens, cost, self.leases)
        team = self.keys.team_policy(key_id)
        subject = self.team_leases.get(request_id) or (team[0] if team is not None else None)
        if subject is not None:
            self._settle(
                subject,
                team[1] if team is not None else KeyPolicy(),
                request_id,
                settled,
                tokens,
                cost,
                self.team_leases,
            )
        scoped = user_subject(key_id, self.keys.policy(key_id), job.request.attribution.user)
        user_held = self.user_leases.get(request_id)
        if user_held is not None or scoped is not None:
            subject, budgets = scoped if scoped is not None else (user_held or "", KeyPolicy())
            self._settle(user_held or subject, budgets, request_id, settled, 0, cost, self.user_leases)

    def _settle(
        self,
        key_id: str,
        policy: KeyPolicy,
        request_id: str,
        settled: "SettledTurn",
        tokens: int,
        cost: float,
        leases: dict[str, str],
    ) -> None:
        """Release what the turn held under `key_id` (a key or a team subject) and charge its tokens and cost."""
        held = leases.pop(request_id, None) is not None
        charge = (policy.tokens_per_minute and tokens > 0) or (policy.has_budget and cost > 0)
        if held or charge:
            started = Periods.at(settled.created_at_ms / 1000)
            ended = Periods.at(settled.settled_at_ms / 1000)
            charged_tokens, charged_cost = (tokens, cost) if charge else (0, 0.0)
            marker_ttl_ms = 2 * self.retry_window_ms

            def attempt() -> Awaitable[object]:
                return self.store.settle(
                    key_id, request_id, charged_tokens, ended, charged_cost, started, marker_ttl_ms
                )

            self._spawn(self._charge(key_id, policy, attempt, started if policy.has_budget and cost > 0 else None))

    async def _charge(
        self, key_id: str, policy: KeyPolicy, attempt: Callable[[], Awaitable[object]], started: Periods | None
    ) -> None:
        """Settle with the store; then, for a charged budget (`started`: the periods it was charged to), report
        how much of it is used."""
        await self._persist("charge", attempt)
        if started is not None:
            await self._report_budget(key_id, policy, started)

    async def _report_budget(self, subject: str, policy: KeyPolicy, periods: Periods) -> None:
        """Read the subject's spend in `periods`; set `gateway_budget_used_ratio` (teams always; keys only with
        key labels on) and send the 80 % / 100 % webhook alerts due (teams and keys; end users get neither)."""
        if subject.startswith(TEAM_SUBJECT):
            team, key = subject.removeprefix(TEAM_SUBJECT), ""
        elif subject.startswith("#"):
            return
        else:
            team, key = policy.team or "", subject
        gauge = self.metrics is not None and (not key or self.metrics.key_labels)
        if not gauge and self.alerts is None:
            return
        try:
            day, month = await self._bounded(self.store.spent(subject, periods))
            due = []
            for period, spent, budget in (
                ("day", day, policy.budget_usd_per_day),
                ("month", month, policy.budget_usd_per_month),
            ):
                if budget <= 0:
                    continue
                if gauge and self.metrics is not None:
                    self.metrics.budget_used_ratio(team, key, period, spent / budget)
                if self.alerts is not None:
                    due += await self._bounded(self.alerts.check(subject, team, key, period, periods, spent, budget))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._store_failed("spent", exc)
            return
        for body in due:
            if self.alerts is not None:
                self._spawn(self.alerts.send(body))

    def _spawn(self, coro: Awaitable[None]) -> None:
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
            held = [*self.leases.items(), *self.team_leases.items(), *self.user_leases.items()]
            if not held:
                continue
            try:
                leases = [(key, request) for request, key in held]
                await self._bounded(self.store.renew(leases, int(time.time() * 1000), self.lease_ttl_ms))
                raise_dropped_cancellation()
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

    def _rejected(self, kind: str) -> None:  # a LimitKind or a Rejection
        if self.metrics is not None:
            self.metrics.rejected_request(kind)

    def _store_failed(self, operation: str, exc: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.limit_store_error(operation)
        log.warning(
            "limit store %s failed (%s); failing %s",
            operation,
            type(exc).__name__,
            "open" if self.fail_open else "closed",
        )


def _describe(kind: LimitKind, key_id: str, policy: KeyPolicy) -> str:
    if kind is LimitKind.RATE_LIMIT_RPM:
        return f"API key {key_id}: requests per minute limit reached (limit {policy.requests_per_minute})"
    if kind is LimitKind.RATE_LIMIT_TPM:
        return f"API key {key_id}: tokens per minute limit reached (limit {policy.tokens_per_minute})"
    if kind is LimitKind.CONCURRENCY_LIMIT:
        return f"API key {key_id}: concurrent streams limit reached (limit {policy.concurrent_streams})"
    budgets = []
    if policy.budget_usd_per_day:
        budgets.append(f"{policy.budget_usd_per_day:g} USD per day")
    if policy.budget_usd_per_month:
        budgets.append(f"{policy.budget_usd_per_month:g} USD per month")
    if kind is LimitKind.BUDGET_IN_FLIGHT:
        return (
            f"API key {key_id}: the rest of the spend budget ({', '.join(budgets)}) is reserved by turns in "
            "flight; retry when they have finished"
        )
    return f"API key {key_id}: spend budget exhausted ({', '.join(budgets)}) until the period resets"
