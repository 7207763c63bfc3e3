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

When the store fails or does not answer within `GATEWAY_REDIS_TIMEOUT` (a timeout is asked once more first:
a stall of this process's event loop is not a store that is down), `GATEWAY_REDIS_FAIL_OPEN` decides: each
replica enforces the key's limits alone (default: a `MemoryLimitStore` of its own, as a single-process gateway
does, so N replicas admit at most N times a limit while the store is away; the gauge
`gateway_limits_local_fallback` is 1 meanwhile), or refuse with 503 `limits_unavailable`. Every settled turn is
charged to the local store too, so its budgets and tokens per minute are current when it takes over. Nothing
waits longer than twice the timeout (rebuilding a spend counter from the ledger, once per key and period, is
bounded by SEED_TIMEOUT_S). An
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
from app.policy.memory_store import MemoryLimitStore
from app.policy.store import ADMITTED, WINDOW_MS, LimitStore, Periods, Verdict
from app.redis_client import bounded
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
        # Where the limits are enforced while `store` does not answer and the gateway fails open; the leases it
        # holds (`local_leases`) are settled there.
        self.local: LimitStore = store if isinstance(store, MemoryLimitStore) else MemoryLimitStore()
        self.local_leases: set[str] = set()
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
        verdict = await self._asked(key_id, policy, request_id)
        await self._refuse(verdict, key_id, policy)
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
        try:
            await self._refuse(await self._asked(subject, budgets, request_id), subject, budgets)
        except BaseException:  # refused, cancelled, or no store to ask with fail-open off: undo the key's and team's
            self._undo_key(key_id, request_id)
            team = self.team_leases.pop(request_id, None)
            if team is not None:
                self._abandon(team, request_id)
            raise
        self.user_leases[request_id] = subject

    async def _admit_team(self, key_id: str, request_id: str) -> None:
        """The key's team's shared limits and budgets (`ClientKeys.team_policy`), counted under the team's
        subject exactly as a key's; a refusal (or a cancellation, or a store that cannot answer with fail-open
        off) undoes what the key's own admission took."""
        team = self.keys.team_policy(key_id)
        if team is None:
            return
        subject, policy = team
        try:
            await self._refuse(await self._asked(subject, policy, request_id), subject, policy)
        except BaseException:
            self._undo_key(key_id, request_id)
            raise
        if policy.concurrent_streams or policy.has_budget:
            self.team_leases[request_id] = subject

    def _undo_key(self, key_id: str, request_id: str) -> None:
        """The key's own admission of a turn its team refused: release and void it."""
        self.leases.pop(request_id, None)
        self._abandon(key_id, request_id)

    async def _asked(self, key_id: str, policy: KeyPolicy, lease: str) -> Verdict:
        """The store's verdict on admitting `lease` under `policy`; a timeout is asked once more (admissions are
        idempotent per lease), since a stall of this process's loop also ends in one; when the store fails, the
        local store's verdict (fail-open) or LimitsUnavailable (fail-closed)."""
        try:
            try:
                verdict = await self._admit(self.store, key_id, policy, lease)
            except TimeoutError:
                verdict = await self._admit(self.store, key_id, policy, lease)
        except asyncio.CancelledError:  # the request went away while the store was being asked
            self._abandon(key_id, lease)
            raise
        except Exception as exc:  # the store is down, slow or broken
            return await self._unavailable(key_id, policy, lease, exc)
        self._local_fallback(False)
        return verdict

    async def _refuse(self, verdict: Verdict, key_id: str, policy: KeyPolicy) -> None:
        """Raise the store's refusal (429 naming the limit, Retry-After; a budget's with what was spent and the
        next turn's estimate), if it refused."""
        if verdict.kind is None:
            return
        kind = verdict.kind.answered_as
        self._rejected(kind)
        wait_ms = max(verdict.retry_after_ms, 0)
        if verdict.kind.per_minute:  # another replica's clock may run a few ms ahead of ours
            wait_ms = min(wait_ms, WINDOW_MS)
        message = _describe(verdict.kind, key_id, policy)
        if verdict.kind is LimitKind.BUDGET_EXCEEDED:
            message += await self._budget_detail(key_id, policy)
        raise LimitExceeded(message, kind, math.ceil(wait_ms / 1000))

    async def _budget_detail(self, key_id: str, policy: KeyPolicy) -> str:
        """For a budget refusal: what the key spent in each budget's period and what the next turn is estimated
        to cost (its latest turn's cost), from the ledger; a budget can stop a key before it is all spent, when
        what is left would not cover a turn like the latest. Bounded by the store timeout; "" when the ledger
        does not answer in time (the refusal stands either way)."""
        periods = Periods.at(time.time())
        budgets = [
            (budget, label, since)
            for budget, label, since in (
                (policy.budget_usd_per_day, "today (UTC)", periods.day_start_ms),
                (policy.budget_usd_per_month, "this month (UTC)", periods.month_start_ms),
            )
            if budget
        ]
        try:
            async with asyncio.timeout(self.timeout):
                spent = [await self.ledger_spend(key_id, since) for _, _, since in budgets]
                estimate = await self.ledger_last_cost(key_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # the ledger is slow or down: the refusal without the figures
            return ""
        parts = [f"spent {amount:.4g} of {budget:g} USD {label}" for (budget, label, _), amount in zip(budgets, spent)]
        if estimate > 0:
            left = min(budget - amount for (budget, _, _), amount in zip(budgets, spent))
            parts.append(f"the next turn is estimated at {estimate:.4g} USD (the latest turn's cost)")
            if left > 0:
                parts[-1] += f", more than the {left:.4g} USD left"
        return " (" + "; ".join(parts) + ")" if parts else ""

    async def _unavailable(self, key_id: str, policy: KeyPolicy, lease: str, exc: BaseException) -> Verdict:
        """The store could not answer an admission: undo whatever it may have taken, then raise
        LimitsUnavailable (fail-closed) or answer as this replica alone would (fail-open: the local store)."""
        self._abandon(key_id, lease)
        self._store_failed("admit", exc)
        if not self.fail_open:
            self._rejected(Rejection.LIMITS_UNAVAILABLE)
            raise LimitsUnavailable("per-key limits cannot be checked right now (limit store unavailable)") from None
        if self.local is self.store:
            return ADMITTED  # the local store itself failed: nothing else to ask
        self._local_fallback(True)
        try:
            verdict = await self._admit(self.local, key_id, policy, lease)
        except asyncio.CancelledError:
            await self.local.abandon(key_id, lease, int(time.time() * 1000), 2 * self.retry_window_ms)
            raise
        except Exception as local_exc:  # the ledger did not answer the spend seeding in time
            log.warning("local limits could not be checked (%s): admitted", type(local_exc).__name__)
            return ADMITTED
        if verdict.kind is None and (policy.concurrent_streams or policy.has_budget):
            self.local_leases.add(lease)  # a hold of the local store: released there
        return verdict

    def _local_fallback(self, in_effect: bool) -> None:
        if self.metrics is not None:
            self.metrics.limits_local(in_effect)

    def check_models(self, key_id: str | None, refs: list[str]) -> None:
        """Raise ModelNotAllowed (naming the field) when the key's policy does not allow one of `refs` (the
        request's model, then its fallbacks). Counts nothing."""
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
        await self._admit_lease(key_id, policy, streams_only, lease)

    async def admit_count(self, key_id: str | None, refs: list[str], lease: str) -> None:
        """A token count: the model allowance, then the key's requests per minute and concurrent streams (a count
        holds an upstream connection while it runs), with a lease of its own (`lease`, released by
        `release_stream`). No tpm or budget: a count spends nothing."""
        if key_id is None:
            return
        self.check_models(key_id, refs)
        policy = self.keys.policy(key_id)
        if not (policy.requests_per_minute or policy.concurrent_streams):
            return
        counted = KeyPolicy(
            requests_per_minute=policy.requests_per_minute, concurrent_streams=policy.concurrent_streams
        )
        await self._admit_lease(key_id, policy, counted, lease)

    async def _admit_lease(self, key_id: str, policy: KeyPolicy, counted: KeyPolicy, lease: str) -> None:
        """One store admission of `counted` (a part of the key's `policy`) under `lease`; its hold, when it takes
        one, is released by `release_stream`."""
        verdict = await self._asked(key_id, counted, lease)
        await self._refuse(verdict, key_id, policy)
        if counted.concurrent_streams:
            self.leases[lease] = key_id

    def release_stream(self, lease: str) -> None:
        """A resumption admitted by `admit_stream`, or a count by `admit_count`, ended."""
        key_id = self.leases.pop(lease, None)
        if key_id is not None:
            now = Periods.at(time.time())
            if lease in self.local_leases:
                self._settle_local(key_id, lease, 0, now, 0.0, now)
                return
            marker_ttl_ms = 2 * self.retry_window_ms
            self._spawn(
                self._persist("release", lambda: self.store.settle(key_id, lease, 0, now, 0.0, now, marker_ttl_ms))
            )

    def _settle_local(
        self, key_id: str, lease: str, tokens: int, ended: Periods, cost: float, started: Periods
    ) -> None:
        """Release a hold of the local store (`lease`, if it has one there) and charge it `tokens` and `cost`."""
        self.local_leases.discard(lease)
        marker_ttl_ms = 2 * self.retry_window_ms
        self._spawn(self.local.settle(key_id, lease, tokens, ended, cost, started, marker_ttl_ms))

    async def _admit(self, store: LimitStore, key_id: str, policy: KeyPolicy, request_id: str) -> Verdict:
        periods = Periods.at(time.time())
        verdict = await self._bounded(store.admit(key_id, policy, request_id, periods, self.lease_ttl_ms))
        if verdict.need_seed:
            async with asyncio.timeout(SEED_TIMEOUT_S):
                day, month, last = await asyncio.gather(
                    self.ledger_spend(key_id, periods.day_start_ms),
                    self.ledger_spend(key_id, periods.month_start_ms),
                    self.ledger_last_cost(key_id),
                )
            await self._bounded(store.seed_spend(key_id, periods, day, month, last))
            log.info("spend of key %s rebuilt from the ledger: %.6f USD today, %.6f this month", key_id, day, month)
            verdict = await self._bounded(store.admit(key_id, policy, request_id, periods, self.lease_ttl_ms))
            if verdict.need_seed:
                raise RuntimeError("spend counters missing right after seeding")
        if verdict.void:
            raise RuntimeError("admission of an abandoned request id")
        return verdict

    async def _bounded(self, awaitable: Awaitable[T]) -> T:
        """One store call, bounded by the timeout. Every call to the store goes through here, admissions on the
        request path included: a cancellation that a Redis call dropped as it answered (the request went away,
        the server shuts down: `app.redis_client.raise_dropped_cancellation`) is raised again here, so the
        caller ends (an admission is then abandoned) instead of going on for nobody."""
        return await bounded(awaitable, self.timeout)

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
            team_policy = team[1] if team is not None else KeyPolicy()
            self._settle(subject, team_policy, request_id, settled, tokens, cost, self.team_leases)
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
        held_locally = request_id in self.local_leases
        if held or charge:
            started = Periods.at(settled.created_at_ms / 1000)
            ended = Periods.at(settled.settled_at_ms / 1000)
            charged_tokens, charged_cost = (tokens, cost) if charge else (0, 0.0)
            marker_ttl_ms = 2 * self.retry_window_ms
            if self.local is not self.store:  # the local store's counters stay current for when it takes over
                self._settle_local(key_id, request_id, charged_tokens, ended, charged_cost, started)
            if held_locally and not charge:
                return  # the shared store holds nothing of it

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
            if self.local_leases:  # the holds taken while the store did not answer
                local = [(key, lease) for lease, key in self.leases.items() if lease in self.local_leases]
                await self.local.renew(local, int(time.time() * 1000), self.lease_ttl_ms)
            try:
                leases = [(key, request) for request, key in held]
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
