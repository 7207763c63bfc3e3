"""Two gateway processes sharing one database and one Redis: a key created through one replica's admin API
authenticates on the other within a second, and a key revoked on one is refused on both within a second (the
admin store's version poll, `app.admin.service`), on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Iterator

import httpx
import pytest

from tests.conftest import turn
from tests.procs import GatewayProcess
from tests.redisproc import RedisServer

ADMIN = {"Authorization": "Bearer adm-SECRET"}


@pytest.fixture
def replicas(sim, ledger_url) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    redis_server = RedisServer().start()
    env = {
        "GATEWAY_REDIS_URL": redis_server.url,
        "GATEWAY_ADMIN_KEYS": "root:adm-SECRET",
        # As tests/policy/test_replicas_limits.py: the bound covers the event loop's lag under a 50-turn burst on a
        # loaded machine, and a store that does not answer refuses rather than admitting without limits.
        "GATEWAY_REDIS_TIMEOUT": "2",
        "GATEWAY_REDIS_FAIL_OPEN": "false",
    }
    a = GatewayProcess(sim.url, database_url=ledger_url, **env)
    b = GatewayProcess(sim.url, database_url=ledger_url, **env)
    try:
        a.wait_ready()
        b.wait_ready()
        yield a, b
    finally:
        a.stop()
        b.stop()
        redis_server.stop()


def _status(url: str, secret: str) -> int:
    body = turn("anthropic/text")
    return httpx.post(
        f"{url}/v1/complete", json=body, headers={"Authorization": f"Bearer {secret}"}, timeout=30
    ).status_code


def _seconds_until(url: str, secret: str, status: int, limit: float = 1.0) -> float:
    """How long after now `url` first answers `secret`'s turn with `status` (polled; fails after `limit` s)."""
    started = time.monotonic()
    while True:
        if _status(url, secret) == status:
            return time.monotonic() - started
        if time.monotonic() - started > limit:
            raise AssertionError(f"{url} did not answer {status} within {limit} s")


def _created(url: str, body: dict) -> dict:
    created = httpx.post(f"{url}/v1/admin/keys", json=body, headers=ADMIN, timeout=10)
    assert created.status_code == 201, created.text
    return created.json()


def _known_within_a_second(url: str, secret: str) -> None:
    started = time.monotonic()
    while httpx.get(f"{url}/v1/requests?limit=1", headers={"Authorization": f"Bearer {secret}"}).status_code != 200:
        assert time.monotonic() - started < 1.0, f"{url} does not know the key after 1 s"


def test_key_created_on_one_replica_works_and_revoked_is_refused_on_both_within_a_second(replicas):
    a, b = replicas
    created = httpx.post(f"{a.url}/v1/admin/keys", json={"name": "dev"}, headers=ADMIN, timeout=10)
    assert created.status_code == 201
    secret = created.json()["secret"]
    assert _status(a.url, secret) == 200  # the replica that made the change reloads at once
    _seconds_until(b.url, secret, 200)

    listed = httpx.get(f"{b.url}/v1/admin/keys/dev", headers=ADMIN, timeout=10)
    assert listed.status_code == 200 and listed.json()["source"] == "managed"

    assert httpx.delete(f"{a.url}/v1/admin/keys/dev", headers=ADMIN, timeout=10).status_code == 200
    assert _status(a.url, secret) == 401
    _seconds_until(b.url, secret, 401)


def test_team_budget_holds_under_50_concurrent_turns_across_two_keys_and_two_replicas(replicas):
    """A team day budget that covers one turn, 50 concurrent turns split over two keys of the team and two
    replicas: the team's counters are shared through Redis and each turn in flight reserves its estimate, so
    one turn is served and the other 49 are refused `budget_exceeded`."""
    a, b = replicas
    probe_key = _created(a.url, {"name": "probe"})
    probe = httpx.post(
        f"{a.url}/v1/complete",
        json=turn("anthropic/text", "same"),
        headers={"Authorization": f"Bearer {probe_key['secret']}"},
        timeout=30,
    )
    cost = probe.json()["usage"]["cost"]["total"]
    assert cost > 0
    team = {"name": "crew", "budgets": {"budget_usd_per_day": cost * 1.05}}
    assert httpx.post(f"{a.url}/v1/admin/teams", json=team, headers=ADMIN, timeout=10).status_code == 201
    secrets = [_created(a.url, {"name": name, "team": "crew"})["secret"] for name in ("crew-1", "crew-2")]
    for secret in secrets:  # both keys known on both replicas (a read that starts no turn)
        _known_within_a_second(b.url, secret)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=60)) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{(a.url, b.url)[i % 2]}/v1/complete",
                        json=turn("anthropic/text", "same"),
                        headers={"Authorization": f"Bearer {secrets[(i // 2) % 2]}"},
                    )
                    for i in range(50)
                )
            )

    responses = asyncio.run(burst())
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 1 and statuses.count(429) == 49, statuses
    assert {r.json()["error"]["type"] for r in responses if r.status_code == 429} == {"budget_exceeded"}
