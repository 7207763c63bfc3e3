"""The two limit stores give the same verdicts: random sequences of admissions, settled turns, charges,
abandoned admissions, seeding and clock steps run through `MemoryLimitStore` and `RedisLimitStore` (the
machine's Redis, a key prefix of this test's own) must agree on every answer — kind, Retry-After and "needs
seeding". Then the rules both share, each on both stores: budgets across periods and under concurrency, and
admissions the gateway gave up on."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.policy.keys import KeyPolicy
from app.policy.memory_store import MemoryLimitStore
from app.policy.store import ADMITTED, IN_FLIGHT_RETRY_MS, VOID, Periods, Verdict
from tests.conftest import REDIS_URL, examples, require_redis, run_async

START = 1_796_342_400.0  # a UTC midnight, 2026-12-03 … (days and months roll over within a run)
POLICIES = {
    "a": KeyPolicy(requests_per_minute=3, concurrent_streams=2, tokens_per_minute=50),
    "b": KeyPolicy(budget_usd_per_day=3 / 64, budget_usd_per_month=5 / 64, concurrent_streams=1),
    "c": KeyPolicy(requests_per_minute=2, tokens_per_minute=10, budget_usd_per_month=2 / 64),
    "d": KeyPolicy(requests_per_minute=2),
    "e": KeyPolicy(tokens_per_minute=10),
}
LEASE_TTL_MS = 20_000
MARKER_TTL_MS = 120_000


admit = st.tuples(st.just("admit"), st.sampled_from(sorted(POLICIES)))
step = st.one_of(
    admit,
    admit,
    admit,
    st.tuples(st.just("settle"), st.integers(0, 20), st.sampled_from([0, 1, 5]), st.integers(0, 3)),
    st.tuples(
        st.just("charge"), st.sampled_from(sorted(POLICIES)), st.sampled_from([0, 1, 5, 10, 30]), st.integers(0, 3)
    ),
    st.tuples(st.just("abandon"), st.integers(0, 20)),
    st.tuples(
        st.just("seed"), st.sampled_from(sorted(POLICIES)), st.integers(0, 4), st.integers(0, 6), st.integers(0, 3)
    ),
    st.tuples(st.just("clock"), st.sampled_from([1, 500, 15_000, 30_000, 61_000, 3_600_000, 86_400_000])),
)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=40))
@example([("charge", "e", 10, 0), ("admit", "e")])  # tokens exactly at the limit
@example([("admit", "b"), ("seed", "b", 3, 3, 0), ("admit", "b")])  # spend exactly at the day budget
@example([("admit", "b"), ("seed", "b", 2, 2, 1), ("admit", "b")])  # the latest turn's cost exactly fits
@example([("admit", "b"), ("seed", "b", 2, 2, 0), ("charge", "b", 1, 2), ("admit", "b")])  # it would not
@example([("admit", "b"), ("seed", "b", 0, 0, 4), ("clock", 86_400_000), ("admit", "b")])  # new day, dear last turn
@example([("admit", "c"), ("seed", "c", 0, 0, 0), ("admit", "c"), ("admit", "c")])  # no estimate: one at a time
@example([("admit", "a"), ("abandon", 0), ("admit", "a"), ("admit", "a"), ("admit", "a")])  # abandoned: no trace
@example([("admit", "d"), ("clock", 500), ("admit", "d"), ("admit", "d"), ("clock", 61_000), ("admit", "d")])
def test_memory_and_redis_stores_agree(steps):
    require_redis()
    run_async(_compare(steps))


async def _compare(steps) -> None:
    from app.policy.redis_store import RedisLimitStore
    from app.redis_client import redis_client

    prefix = f"gwtest-{uuid.uuid4().hex[:12]}"
    client = redis_client(REDIS_URL, 2.0)
    stores = [MemoryLimitStore(), RedisLimitStore(client, prefix)]
    now_ms = int(START * 1000)
    leases: list[tuple[str, str]] = []
    try:
        for number, item in enumerate(steps):
            periods = Periods.at(now_ms / 1000)
            kind = item[0]
            if kind == "admit":
                name = item[1]
                lease = f"req-{number}"
                verdicts = [await s.admit(name, POLICIES[name], lease, periods, LEASE_TTL_MS) for s in stores]
                assert verdicts[0] == verdicts[1], (number, item, verdicts)
                if verdicts[0].kind is None and not verdicts[0].need_seed:
                    leases.append((name, lease))
            elif kind == "settle" and leases:  # a turn ends (settled twice: a retried settle charges once)
                _, index, tokens, sixty_fourths = item
                name, lease = leases.pop(index % len(leases))
                for s in stores:
                    for _ in range(2):
                        await s.settle(name, lease, tokens, periods, sixty_fourths / 64, periods, MARKER_TTL_MS)
            elif kind == "charge":  # a turn without a hold (a tpm-only key, or admitted while the store was down)
                _, name, tokens, sixty_fourths = item
                for s in stores:
                    await s.settle(
                        name, f"charge-{number}", tokens, periods, sixty_fourths / 64, periods, MARKER_TTL_MS
                    )
            elif kind == "abandon" and leases:  # then the admission runs again, late: it takes nothing
                name, lease = leases.pop(item[1] % len(leases))
                for s in stores:
                    await s.abandon(name, lease, now_ms, MARKER_TTL_MS)
                late = [await s.admit(name, POLICIES[name], lease, periods, LEASE_TTL_MS) for s in stores]
                assert late == [VOID, VOID], (number, item, late)
            elif kind == "seed":
                _, name, day, month, last = item
                for s in stores:
                    await s.seed_spend(name, periods, day / 64, month / 64, last / 64)
            elif kind == "clock":
                now_ms += item[1]
                for s in stores:  # a replica renews its running turns' leases
                    await s.renew(leases, now_ms, LEASE_TTL_MS) if leases else None
    finally:
        await _drop(client, prefix)
        await client.aclose()


async def _drop(client, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(f"{prefix}:*")]
    if keys:
        await client.delete(*keys)


# ------------------------------------------------------------------ the shared rules, on each store

BUDGET = KeyPolicy(budget_usd_per_day=1.0)


@pytest.fixture(params=["memory", "redis"])
async def store(request):
    """Each store in turn (Redis: the machine's, under a key prefix of this test's own)."""
    if request.param == "memory":
        yield MemoryLimitStore()
        return
    require_redis()
    from app.policy.redis_store import RedisLimitStore
    from app.redis_client import redis_client

    prefix = f"gwtest-{uuid.uuid4().hex[:12]}"
    client = redis_client(REDIS_URL, 2.0)
    yield RedisLimitStore(client, prefix)
    await _drop(client, prefix)
    await client.aclose()


async def test_a_period_with_nothing_spent_admits_whatever_the_latest_turn_cost(store):
    """One turn costing 5x the day budget spends the day: refused until the next day, as Retry-After says. The
    next day has nothing spent, so it admits, although the key's latest turn cost more than a day's budget
    (the estimate used to lock the key out on every later day); a second turn while that one is in flight is
    refused for 1 s (its reservation holds the day), not until the day resets."""
    day1 = Periods.at(START + 3600)
    assert await store.admit("k", BUDGET, "r1", day1, LEASE_TTL_MS) == Verdict(need_seed=True)
    await store.seed_spend("k", day1, 0.0, 0.0, 0.0)
    assert await store.admit("k", BUDGET, "r1", day1, LEASE_TTL_MS) == ADMITTED
    await store.settle("k", "r1", 10, day1, 5.0, day1, MARKER_TTL_MS)
    spent = await store.admit("k", BUDGET, "r2", day1, LEASE_TTL_MS)
    assert spent == Verdict("budget_exceeded", day1.next_day_ms - day1.now_ms)

    day2 = Periods.at(START + 86_400 + 3600)
    assert await store.admit("k", BUDGET, "r3", day2, LEASE_TTL_MS) == Verdict(need_seed=True)
    await store.seed_spend("k", day2, 0.0, 5.0, 5.0)  # what the ledger says: nothing today, the last turn cost 5
    assert await store.admit("k", BUDGET, "r3", day2, LEASE_TTL_MS) == ADMITTED
    assert await store.admit("k", BUDGET, "r4", day2, LEASE_TTL_MS) == Verdict("budget_in_flight", IN_FLIGHT_RETRY_MS)
    await store.settle("k", "r3", 10, day2, 0.25, day2, MARKER_TTL_MS)
    assert await store.admit("k", BUDGET, "r4", day2, LEASE_TTL_MS) == ADMITTED  # 0.25 spent + 0.25 estimated


async def test_turns_in_flight_reserve_their_estimate(store):
    """Each admitted turn reserves the latest turn's cost until it settles: with an estimate of 2/64 and a
    budget of 10/64, five turns may run at once and the sixth waits (Retry-After 1 s); once all five settle at
    their estimate the spend is exactly the budget, never above it. A key with no known cost runs one turn at
    a time."""
    policy = KeyPolicy(budget_usd_per_day=10 / 64)
    periods = Periods.at(START + 60)
    await store.seed_spend("k", periods, 0.0, 0.0, 2 / 64)
    admitted = [await store.admit("k", policy, f"r{i}", periods, LEASE_TTL_MS) for i in range(6)]
    assert admitted == [ADMITTED] * 5 + [Verdict("budget_in_flight", IN_FLIGHT_RETRY_MS)]
    await store.settle("k", "r0", 5, periods, 2 / 64, periods, MARKER_TTL_MS)
    await store.settle("k", "r0", 5, periods, 2 / 64, periods, MARKER_TTL_MS)  # a retried settle charges once
    assert await store.admit("k", policy, "r6", periods, LEASE_TTL_MS) == Verdict(
        "budget_in_flight", IN_FLIGHT_RETRY_MS
    )
    for i in range(1, 5):
        await store.settle("k", f"r{i}", 5, periods, 2 / 64, periods, MARKER_TTL_MS)
    assert await store.admit("k", policy, "r7", periods, LEASE_TTL_MS) == Verdict(
        "budget_exceeded", periods.next_day_ms - periods.now_ms
    )

    await store.seed_spend("new", periods, 0.0, 0.0, 0.0)
    assert await store.admit("new", policy, "n1", periods, LEASE_TTL_MS) == ADMITTED
    assert await store.admit("new", policy, "n2", periods, LEASE_TTL_MS) == Verdict(
        "budget_in_flight", IN_FLIGHT_RETRY_MS
    )


class StalledStore:
    """A store behind a stalled connection: admissions (and, with `stall_abandon`, abandons) reach it only once
    `wake` is set, like scripts queued on a stopped Redis that run when it resumes — after the gateway gave up."""

    def __init__(self, inner, stall_abandon: bool) -> None:
        self.inner = inner
        self.wake = asyncio.Event()
        self.stall_abandon = stall_abandon
        self.late: list[asyncio.Future] = []

    async def _later(self, call):
        async def run():
            await self.wake.wait()
            return await call()

        task = asyncio.ensure_future(run())
        self.late.append(task)
        return await asyncio.shield(task)

    async def admit(self, *args):
        return await self._later(lambda: self.inner.admit(*args))

    async def abandon(self, *args):
        if self.stall_abandon:
            return await self._later(lambda: self.inner.abandon(*args))
        return await self.inner.abandon(*args)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize(
    "case", ["fail-closed, undone first", "fail-open, late admission first", "request cancelled, undone first"]
)
async def test_an_admission_the_gateway_gave_up_on_leaves_no_trace(store, tmp_path, case):
    """The store answers an admission only after the gateway stopped waiting (timeout, or the request went
    away): the admission still runs (hold, rpm entry, reservation), before or after the gateway's undo reaches
    the store. Either way nothing of it is left: the key's one slot, one request per minute and its budget are
    free for the next turn."""
    from app.policy.keys import ClientKeys
    from app.policy.limits import Limits
    from app.contract.refusals import LimitExceeded, LimitsUnavailable
    from tests.policy.test_keys_policy import write_keys

    write_keys(tmp_path / "keys.json", k={"concurrent_streams": 1, "requests_per_minute": 1, "budget_usd_per_day": 1.0})
    now = Periods.at(time.time())
    await store.seed_spend("k", now, 0.0, 0.0, 0.6)  # a reservation left behind would not let a second turn fit
    stalled = StalledStore(store, stall_abandon=case.startswith("fail-open"))
    limits = Limits(
        ClientKeys([], str(tmp_path / "keys.json")),
        stalled,
        _no_spend,
        fail_open=case.startswith("fail-open"),
        timeout=0.2,
    )
    if case.startswith("fail-closed"):
        with pytest.raises(LimitsUnavailable):
            await limits.admit("k", ["anthropic/text"], "given-up")
    elif case.startswith("fail-open"):
        await limits.admit("k", ["anthropic/text"], "given-up")  # served under this replica's own limits
        assert limits.local_leases == {"given-up"}
        limits.release_stream("given-up")  # its turn ends: the local hold is released there
    else:
        admission = asyncio.ensure_future(limits.admit("k", ["anthropic/text"], "given-up"))
        while not stalled.late:
            await asyncio.sleep(0)
        admission.cancel()
        with pytest.raises(asyncio.CancelledError):
            await admission
    assert "given-up" not in limits.leases
    if not stalled.stall_abandon:
        await limits.idle()  # the undo reaches the store before the admission does
    stalled.wake.set()
    await asyncio.gather(*stalled.late)
    await limits.idle()
    await limits.admit("k", ["anthropic/text"], "next")  # a hold, rpm entry or reservation left would refuse it
    assert limits.leases == {"next": "k"}
    with pytest.raises(LimitExceeded) as refused:
        await limits.admit("k", ["anthropic/text"], "third")
    assert refused.value.kind == "budget_exceeded" and refused.value.retry_after == 1  # "next" is in flight
    await limits.aclose()


async def _no_spend(key: str, since_ms: int) -> float:
    return 0.0


class OnceSlowStore(MemoryLimitStore):
    """A store whose first admission answers only after the gateway stopped waiting, as one does when the
    gateway's own event loop was stalled past the timeout; it answers the next at once."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def admit(self, *args: Any, **kwargs: Any) -> Verdict:
        self.asked += 1
        if self.asked == 1:
            await asyncio.Event().wait()  # never answers: the gateway's timeout ends it
        return await super().admit(*args, **kwargs)


async def test_one_timed_out_admission_is_asked_again_not_taken_for_a_store_that_is_down(tmp_path):
    from app.policy.keys import ClientKeys
    from app.policy.limits import Limits
    from app.contract.refusals import LimitExceeded
    from tests.policy.test_keys_policy import write_keys

    write_keys(tmp_path / "keys.json", k={"concurrent_streams": 1})
    store = OnceSlowStore()
    limits = Limits(ClientKeys([], str(tmp_path / "keys.json")), store, _no_spend, fail_open=True, timeout=0.2)
    limits.local = MemoryLimitStore()  # as with Redis: a local store of its own besides the shared one
    await limits.admit("k", ["anthropic/text"], "stalled")
    assert store.asked == 2 and limits.leases == {"stalled": "k"} and not limits.local_leases  # the shared store's
    with pytest.raises(LimitExceeded):
        await limits.admit("k", ["anthropic/text"], "second")  # the shared store holds the key's one slot
    await limits.aclose()


async def test_one_turn_charges_its_key_team_and_end_user_each_once_and_a_claim_is_won_once(store):
    """The charge marker is per subject: the same request id settled under a key and under its team charges
    both (and again under either charges nothing); `claim` (budget alerts) answers True once per marker."""
    day = Periods.at(START + 3600)
    for name in ("k", "#team:t"):
        await store.seed_spend(name, day, 0.0, 0.0, 0.0)
        await store.admit(name, BUDGET, "r1", day, LEASE_TTL_MS)
    for name in ("k", "#team:t", "k", "#team:t"):
        await store.settle(name, "r1", 10, day, 0.25, day, MARKER_TTL_MS)
    assert await store.spent("k", day) == (0.25, 0.25)
    assert await store.spent("#team:t", day) == (0.25, 0.25)
    assert [await store.claim("alert:#team:t:day:0.8", 60_000) for _ in range(2)] == [True, False]
