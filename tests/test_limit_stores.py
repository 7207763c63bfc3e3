"""The two limit stores give the same verdicts: random sequences of admissions, releases, charges, seeding and
clock steps run through `MemoryLimitStore` and `RedisLimitStore` (the machine's Redis, a key prefix of this
test's own) must agree on every answer — kind, Retry-After and "needs seeding"."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.keys import KeyPolicy
from app.limits import MemoryLimitStore, Periods
from tests.conftest import run_async

REDIS_URL = "redis://127.0.0.1:6379/0"
START = 1_796_342_400.0  # a UTC midnight, 2026-12-03 … (days and months roll over within a run)
POLICIES = {
    "a": KeyPolicy(requests_per_minute=3, concurrent_streams=2, tokens_per_minute=50),
    "b": KeyPolicy(budget_usd_per_day=3 / 64, budget_usd_per_month=5 / 64, concurrent_streams=1),
    "c": KeyPolicy(requests_per_minute=2, tokens_per_minute=10, budget_usd_per_month=2 / 64),
    "d": KeyPolicy(requests_per_minute=2),
    "e": KeyPolicy(tokens_per_minute=10),
}
LEASE_TTL_MS = 20_000


def _redis_up() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


admit = st.tuples(st.just("admit"), st.sampled_from(sorted(POLICIES)))
step = st.one_of(
    admit,
    admit,
    admit,
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("charge"), st.sampled_from(sorted(POLICIES)), st.sampled_from([0, 1, 5, 10, 30]), st.integers(0, 3)),
    st.tuples(st.just("seed"), st.sampled_from(sorted(POLICIES)), st.integers(0, 4), st.integers(0, 6), st.integers(0, 3)),
    st.tuples(st.just("clock"), st.sampled_from([1, 500, 15_000, 30_000, 61_000, 3_600_000, 86_400_000])),
)


@pytest.mark.skipif(not _redis_up(), reason="no Redis on 127.0.0.1:6379")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=40))
@example([("charge", "e", 10, 0), ("admit", "e")])  # tokens exactly at the limit
@example([("admit", "b"), ("seed", "b", 3, 3, 0), ("admit", "b")])  # spend exactly at the day budget
@example([("admit", "b"), ("seed", "b", 2, 2, 1), ("admit", "b")])  # the latest turn's cost exactly fits
@example([("admit", "b"), ("seed", "b", 2, 2, 0), ("charge", "b", 1, 2), ("admit", "b")])  # it would not
@example([("admit", "d"), ("clock", 500), ("admit", "d"), ("admit", "d"), ("clock", 61_000), ("admit", "d")])
def test_memory_and_redis_stores_agree(steps):
    run_async(_compare(steps))


async def _compare(steps) -> None:
    from app.redis_limits import RedisLimitStore, redis_client

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
            elif kind == "release" and leases:
                name, lease = leases.pop(item[1] % len(leases))
                for s in stores:
                    await s.release(name, lease)
            elif kind == "charge":
                _, name, tokens, sixty_fourths = item
                for s in stores:
                    await s.charge(name, tokens, periods, sixty_fourths / 64, periods)
            elif kind == "seed":
                _, name, day, month, last = item
                for s in stores:
                    await s.seed_spend(name, periods, day / 64, month / 64, last / 64)
            elif kind == "clock":
                now_ms += item[1]
                for s in stores:  # a replica renews its running turns' leases
                    await s.renew(leases, now_ms, LEASE_TTL_MS) if leases else None
    finally:
        keys = [key async for key in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
