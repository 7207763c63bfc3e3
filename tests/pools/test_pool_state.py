"""The pool state stores (`app.pools.state.MemoryPoolStore`, `app.pools.redis_store.RedisPoolStore` on the real
Redis at 127.0.0.1:6379 under a prefix of the test's own) keep the same rules, on explicit clocks: a cooldown
lasts the Retry-After or a doubling backoff and ends; an rpm quota frees up as its window slides; a tpm quota
holds for its minute; leases expire; a conversation's deployment is remembered after a success only; latency
estimates are EWMAs. The choice of order by strategy is checked on snapshots."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from app.contract.catalog_entries import Deployment, Pool
from app.pools.choice import order
from app.pools.state import (
    Acquired,
    Busy,
    DeploymentState,
    Finished,
    MemoryPoolStore,
    Snapshot,
    cool_ms,
    next_minute_ms,
)

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

    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:6379/0", decode_responses=True)
    try:
        await client.ping()
    except Exception:
        pytest.skip("no Redis at 127.0.0.1:6379")
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


def test_leases_latency_and_affinity(kind):
    async def main() -> None:
        store = await _store(kind)
        await store.acquire("p", [A], "l1", 1_000, T0)
        await store.acquire("p", [A], "l2", 1_000, T0)
        snap = await store.snapshot("p", ["a"], None, T0 + 1)
        assert snap.states["a"].in_flight == 2
        await store.finish("p", "a", "l1", Finished(ok=False, ttft=1.0, gap=0.1), T0 + 2)
        await store.finish("p", "a", "l9", Finished(ok=True, ttft=2.0, affinity="conv"), T0 + 3)
        snap = await store.snapshot("p", ["a"], "conv", T0 + 4)
        assert snap.states["a"].in_flight == 1 and snap.affinity == "a"
        assert snap.states["a"].ttft == pytest.approx(0.3 * 2.0 + 0.7 * 1.0) and snap.states["a"].gap == pytest.approx(
            0.1
        )
        assert snap.states["a"].sampled_at_ms == T0 + 3
        assert (await store.snapshot("p", ["a"], None, T0 + 1_001)).states["a"].in_flight == 0  # l2's lease expired
        assert (await store.snapshot("p", ["a"], "other", T0 + 5)).affinity is None
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
