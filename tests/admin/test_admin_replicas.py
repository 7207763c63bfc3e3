"""Two gateway processes sharing one database and one Redis: a key created through one replica's admin API
authenticates on the other within a second, and a key revoked on one is refused on both within a second (the
admin store's version poll, `app.admin.service`), on SQLite and on PostgreSQL."""

from __future__ import annotations

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
    env = {"GATEWAY_REDIS_URL": redis_server.url, "GATEWAY_ADMIN_KEYS": "root:adm-SECRET"}
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
