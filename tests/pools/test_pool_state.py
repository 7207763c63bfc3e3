"""The pool state stores (`app.pools.state.MemoryPoolStore`, `app.pools.redis_store.RedisPoolStore` on the real
Redis (tests/conftest.py `REDIS_URL`, `GATEWAY_TEST_REDIS_URL`) under a prefix of the test's own) keep the same rules, on explicit clocks: a cooldown
lasts the Retry-After or a doubling backoff and ends; an rpm quota frees up as its window slides; a tpm quota
holds for its minute; leases expire; a conversation is placed when its turn takes a slot, never over a newer
turn's placement; latency estimates are EWMAs. The choice of order by strategy is checked on snapshots."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from app.contract.catalog_entries import Deployment, Pool
from app.pools.balancer import Pools
from app.pools.choice import order
from app.pools.state import (
    Acquired,
    Busy,
    DeploymentState,
    Finished,
    MemoryPoolStore,
    Placement,
    Snapshot,
    Threshold,
    cool_ms,
    next_minute_ms,
)
from tests.conftest import require_redis

A = Deployment("a", "pa", "m")
B = Deployment("b", "pb", "m", rpm=2, tpm=100)
T0 = 1_800_000_000_000  # epoch ms, on a minute boundary


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _store(kind: str) -> Any:
    if kind == "memory":
        return MemoryPoolStore()
    import redis.asyncio

    from app.pools.redis_store import RedisPoolStore

    client = redis.asyncio.Redis.from_url(require_redis(), decode_responses=True)
    return RedisPoolStore(client, f"gwtest-{uuid.uuid4().hex[:10]}", timeout=2)


@pytest.fixture(params=["memory", "redis"])
def kind(request) -> str:
    return request.param


def test_a_cooldown_lasts_its_retry_after_or_a_doubling_backoff(kind):
    async def main() -> None:
        store = await _store(kind)
        assert await store.cool("p", "a", 5_000, T0) == 5_000
        assert await store.acquire("p", [A], "l1", 60_000, T0 + 4_999) == Busy(1)
        assert isinstance(await store.acquire("p", [A], "l2", 60_000, T0 + 5_000), Acquired)
        # Without a Retry-After: 1 s, 2 s, 4 s… as failures repeat; a success resets the streak.
        assert [await store.cool("p", "b", None, T0) for _ in range(3)] == [1_000, 2_000, 4_000]
        await store.finish("p", "b", "none", Finished(ok=True), T0)
        assert await store.cool("p", "b", None, T0) == 1_000
        await store.aclose()

    run(main())


def test_quotas_are_counted_and_free_up(kind):
    async def main() -> None:
        store = await _store(kind)
        assert await store.acquire("p", [B, A], "l1", 60_000, T0) == Acquired("b", "l1")
        assert await store.acquire("p", [B, A], "l2", 60_000, T0 + 10) == Acquired("b", "l2")
        assert await store.acquire("p", [B, A], "l3", 60_000, T0 + 20) == Acquired("a", "l3")  # b's rpm is used up
        assert await store.acquire("p", [B], "l4", 60_000, T0 + 20) == Busy(60_000 - 20)
        assert await store.acquire("p", [B], "l5", 60_000, T0 + 60_001) == Acquired("b", "l5")  # the window slid
        await store.finish("p", "b", "l5", Finished(ok=True, tokens=150), T0 + 60_002)
        later = T0 + 2 * 60_000 + 5  # rpm window clear; tokens counted in the previous minute only
        assert isinstance(await store.acquire("p", [B], "l6", 60_000, later), Acquired)
        await store.finish("p", "b", "l6", Finished(ok=True, tokens=100), later)
        assert await store.acquire("p", [B], "l7", 60_000, later + 1) == Busy(next_minute_ms(later) - later - 1)
        await store.aclose()

    run(main())


def test_a_placement_never_replaces_a_newer_turns_placement(kind):
    async def main() -> None:
        store = await _store(kind)
        assert (await store.snapshot("p", ["a", "b"], "conv", T0)).affinity is None
        await store.acquire("p", [A], "l1", 60_000, T0, Placement("conv", 200))  # turn 2 placed on a
        assert (await store.snapshot("p", ["a", "b"], "conv", T0)).affinity == "a"  # at once, not at its end
        await store.acquire("p", [B], "l2", 60_000, T0 + 5, Placement("conv", 100))  # turn 1 fails over late
        assert (await store.snapshot("p", ["a", "b"], "conv", T0 + 6)).affinity == "a"
        await store.acquire("p", [B], "l3", 60_000, T0 + 7, Placement("conv", 300))  # turn 3 goes to b
        assert (await store.snapshot("p", ["a", "b"], "conv", T0 + 8)).affinity == "b"
        assert (await store.snapshot("p", ["a", "b"], "other", T0 + 8)).affinity is None
        await store.aclose()

    run(main())


def test_leases_latency_and_affinity(kind):
    async def main() -> None:
        store = await _store(kind)
        await store.acquire("p", [A], "l1", 1_000, T0)
        await store.acquire("p", [A], "l2", 1_000, T0)
        snap = await store.snapshot("p", ["a"], None, T0 + 1)
        assert snap.states["a"].in_flight == 2
        await store.finish("p", "a", "l1", Finished(ok=False, ttft=1.0, gap=0.1), T0 + 2)
        await store.finish("p", "a", "l9", Finished(ok=True, ttft=2.0), T0 + 3)
        await store.acquire("p", [A], "l3", 1_000, T0 + 3, Placement("conv", T0 + 3))  # a turn of "conv" on a
        snap = await store.snapshot("p", ["a"], "conv", T0 + 4)
        assert snap.states["a"].in_flight == 2 and snap.affinity == "a"
        assert snap.states["a"].ttft == pytest.approx(0.3 * 2.0 + 0.7 * 1.0) and snap.states["a"].gap == pytest.approx(
            0.1
        )
        assert snap.states["a"].sampled_at_ms == T0 + 3
        assert (await store.snapshot("p", ["a"], None, T0 + 1_004)).states["a"].in_flight == 0  # l2's, l3's expired
        assert (await store.snapshot("p", ["a"], "other", T0 + 5)).affinity is None
        await store.aclose()

    run(main())


def test_turns_waiting_on_a_cooldown_are_released_over_a_window_not_at_once():
    pools = Pools(rng=random.Random(7))
    delays = [pools.release_delay_ms(1_000) for _ in range(30)]  # 30 turns waiting on a cooldown ending in 1 s
    assert min(delays) >= 1_000  # none before the deployment is ready
    assert max(delays) - min(delays) >= 200 and max(delays) <= 1_250  # spread over a quarter of the wait
    assert max(pools.release_delay_ms(60_000) for _ in range(30)) <= 61_000  # at most a second later
    assert 50 >= max(pools.release_delay_ms(10) for _ in range(30)) - 10 >= 25  # at least 50 ms of window


def test_a_failure_threshold_cools_only_at_n_failures_within_its_window(kind):
    async def main() -> None:
        store = await _store(kind)
        three = Threshold(3, 10_000)
        assert await store.cool("p", "a", None, T0, "server_error", threshold=three) is None
        assert await store.cool("p", "a", None, T0 + 1_000, "server_error", threshold=three) is None
        assert (await store.snapshot("p", ["a"], None, T0 + 1_001)).states["a"].cooled_until_ms == 0  # not cooled
        assert await store.cool("p", "a", None, T0 + 2_000, "server_error", threshold=three) == 1_000  # the third
        assert (await store.snapshot("p", ["a"], None, T0 + 2_001)).states["a"].cooled_until_ms == T0 + 3_000
        # Two more failures, then one after the window: the count starts again, nothing cooled.
        assert await store.cool("p", "a", None, T0 + 5_000, "server_error", threshold=three) is None
        assert await store.cool("p", "a", None, T0 + 6_000, "server_error", threshold=three) is None
        assert await store.cool("p", "a", None, T0 + 16_000, "server_error", threshold=three) is None
        assert await store.cool("p", "b", None, T0, "rate_limited") == 1_000  # the default: the first failure
        await store.aclose()

    run(main())


def test_a_concurrency_cap_holds_a_deployment_to_its_attempts_in_flight(kind):
    async def main() -> None:
        store = await _store(kind)
        capped = Deployment("c", "pc", "m", max_in_flight=2)
        assert await store.acquire("p", [capped, A], "l1", 60_000, T0) == Acquired("c", "l1")
        assert await store.acquire("p", [capped, A], "l2", 60_000, T0) == Acquired("c", "l2")
        assert await store.acquire("p", [capped, A], "l3", 60_000, T0) == Acquired("a", "l3")  # c is full
        assert await store.acquire("p", [capped], "l4", 60_000, T0) == Busy(1_000)
        await store.finish("p", "c", "l1", Finished(ok=True), T0 + 5)
        assert await store.acquire("p", [capped, A], "l5", 60_000, T0 + 6) == Acquired("c", "l5")
        await store.aclose()

    run(main())


def test_cool_ms_caps_retry_after_and_backoff():
    assert cool_ms(1, 10_000_000) == 300_000 and cool_ms(20, None) == 60_000 and cool_ms(1, None) == 1_000


def _snapshot(**states: DeploymentState) -> Snapshot:
    return Snapshot(states, None)


def test_order_by_strategy():
    x, y, z = Deployment("x", "p", "m"), Deployment("y", "p", "m"), Deployment("z", "p", "m")
    rng = random.Random(1)
    states = {
        "x": DeploymentState(in_flight=5, ttft=0.5, gap=0.01),
        "y": DeploymentState(in_flight=1, ttft=0.1, gap=0.001),
        "z": DeploymentState(in_flight=3, cooled_until_ms=T0 + 10, ttft=0.01),
    }
    snap = Snapshot(states, None)
    pool = Pool("p", (x, y, z))
    least = order(Pool("p", (x, y, z), "least-in-flight"), [x, y, z], snap, T0, rng, {})
    assert [d.name for d in least] == ["y", "x", "z"]  # z cooled: last
    fastest = [order(Pool("p", (x, y, z), "lowest-latency"), [x, y, z], snap, T0, rng, {})[0].name for _ in range(200)]
    assert fastest.count("y") >= 180
    cheap = order(Pool("p", (x, y, z), "cost"), [x, y, z], snap, T0, rng, {"x": 1.0, "y": 9.0, "z": 0.1})
    assert [d.name for d in cheap] == ["x", "y", "z"]
    stuck = order(pool, [x, y, z], Snapshot(states, "x"), T0, rng, {})
    assert stuck[0].name == "x"
    assert order(pool, [x, y, z], Snapshot(states, "z"), T0, rng, {})[-1].name == "z"  # a cooled home is left


def test_lowest_latency_shares_turns_by_weight_within_its_tolerance_band():
    a, b, c = Deployment("a", "p", "m"), Deployment("b", "p", "m", weight=3), Deployment("c", "p", "m")
    rng = random.Random(5)
    states = {  # a and b within 10 % of each other, c 50 % slower
        "a": DeploymentState(ttft=0.200, sampled_at_ms=T0),
        "b": DeploymentState(ttft=0.215, sampled_at_ms=T0),
        "c": DeploymentState(ttft=0.300, sampled_at_ms=T0),
    }
    pool = Pool("p", (a, b, c), "lowest-latency")
    firsts = [order(pool, [a, b, c], Snapshot(states, None), T0 + 1, rng, {})[0].name for _ in range(2000)]
    assert 0.2 <= firsts.count("a") / 2000 <= 0.3 and 0.7 <= firsts.count("b") / 2000 <= 0.8  # by weight, 1:3
    assert "c" not in firsts
    narrow = Pool("p", (a, b, c), "lowest-latency", tolerance_percent=0, tolerance_ms=0)
    assert {order(narrow, [a, b, c], Snapshot(states, None), T0 + 1, rng, {})[0].name for _ in range(200)} == {"a"}


def test_lowest_latency_probes_only_stale_estimates():
    fast, slow = Deployment("fast", "p", "m"), Deployment("slow", "p", "m")
    pool = Pool("p", (fast, slow), "lowest-latency")
    rng = random.Random(3)
    fresh = Snapshot(
        {"fast": DeploymentState(ttft=0.01, sampled_at_ms=T0), "slow": DeploymentState(ttft=0.5, sampled_at_ms=T0)},
        None,
    )
    assert {order(pool, [fast, slow], fresh, T0 + 1_000, rng, {})[0].name for _ in range(500)} == {"fast"}
    stale = Snapshot(
        {
            "fast": DeploymentState(ttft=0.01, sampled_at_ms=T0 + 20_000),
            "slow": DeploymentState(ttft=0.5, sampled_at_ms=T0),
        },
        None,
    )
    probes = [order(pool, [fast, slow], stale, T0 + 20_000, rng, {})[0].name for _ in range(1000)].count("slow")
    assert 10 <= probes <= 100  # about 5 %


def test_a_pool_snapshot_that_drops_the_cancellation_ends_its_caller():
    """The turn's task is cancelled as Redis answers its pool snapshot, and the call drops the cancellation
    (redis-py on Python 3.11: `app.redis_client.raise_dropped_cancellation`). Before: the snapshot returned and
    the turn went on to take a deployment's lease; now the caller ends there."""

    async def main() -> None:
        store = await _store("redis")
        asked, answer = asyncio.Event(), asyncio.get_running_loop().create_future()
        script = store._snapshot

        async def dropping_script(**kwargs: Any) -> Any:
            asked.set()
            try:
                await answer
            except asyncio.CancelledError:
                pass  # dropped, as such a write drops it
            return await script(**kwargs)

        store._snapshot = dropping_script
        caller = asyncio.create_task(store.snapshot("p", ["a"], None, T0))
        await asked.wait()
        answer.set_result(None)  # Redis answers, and in the same step of the loop the turn is cancelled
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await store.aclose()

    run(main())


def test_a_request_taken_outside_any_pool_counts_in_flight_and_against_rpm_whatever_the_state(kind):
    async def main() -> None:
        store = await _store(kind)
        await store.cool("p", "b", 30_000, T0)  # cooled: a plain route's request is still counted
        await store.take("b", "d1", 60_000, T0)
        await store.take("b", "d2", 60_000, T0 + 10)
        state = (await store.snapshot("p", ["b"], None, T0 + 20)).states["b"]
        assert (state.in_flight, state.rpm_used) == (2, 2)
        await store.finish("", "b", "d1", Finished(ok=True, tokens=5), T0 + 30)
        state = (await store.snapshot("p", ["b"], None, T0 + 40)).states["b"]
        assert (state.in_flight, state.rpm_used, state.tpm_used) == (1, 2, 5)
        await store.aclose()

    run(main())


def test_recover_ends_a_cooldown_now_and_resets_its_streak(kind):
    async def main() -> None:
        store = await _store(kind)
        await store.cool("p", "a", None, T0)
        await store.cool("p", "a", 60_000, T0 + 10)
        await store.recover("a", T0 + 20)
        state = (await store.snapshot("p", ["a"], None, T0 + 20)).states["a"]
        assert (state.cooled_until_ms, state.streak) == (T0 + 20, 0)
        assert await store.acquire("p", [A], "l1", 60_000, T0 + 21) == Acquired("a", "l1")
        assert await store.cool("p", "a", None, T0 + 30) == 1_000  # the backoff starts again from its first step
        await store.aclose()

    run(main())
