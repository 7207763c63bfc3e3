"""Pools shared by replicas: two gateway processes (`python -m app`) with one Redis of their own, in front of
three simulated deployments (each a simulator on its own port). A 429 cools a deployment on both replicas, an
rpm quota holds across both, least-in-flight evens concurrent streams over both, a conversation keeps its
deployment whichever replica serves it, and the console's pool view of either replica shows the shared state."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import marker, turn
from tests.pool_rig import (
    KEY_ENV,
    PROVIDER_KEY,
    THROTTLED,
    Deployment,
    base_urls,
    pool_catalog,
    state_of_its_own,
    running_deployments,
)
from tests.redisproc import two_replicas


@pytest.fixture(scope="module")
def deployments() -> Iterator[list[Deployment]]:
    yield from running_deployments("rep-a", "rep-b", "rep-c")


@pytest.fixture(scope="module")
def cluster(sim, deployments, tmp_path_factory) -> Iterator[dict[str, Any]]:
    a, b, c = (d.name for d in deployments)
    pools = {
        "shared2": {"deployments": [{"provider": a, "model": "text"}, {"provider": b, "model": "text"}]},
        "console2": {
            "deployments": [
                {"provider": a, "model": "text", "rpm": 1000},
                {"provider": b, "model": "text", "weight": 2},
            ]
        },
        "quota2": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000, "rpm": 5},
                {"provider": b, "model": "text", "weight": 1},
            ]
        },
        "even3": {
            "strategy": "least-in-flight",
            "deployments": [{"provider": d.name, "model": "text"} for d in deployments],
        },
        "sticky3": {"deployments": [{"provider": d.name, "model": "text"} for d in deployments]},
        "capped2": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000, "maxInFlight": 2},
                {"provider": b, "model": "text"},
            ]
        },
    }
    tmp = tmp_path_factory.mktemp("pool-replicas")
    path = pool_catalog(tmp / "catalog.json", state_of_its_own(pools), deployments)
    env = {
        "GATEWAY_CATALOG": str(path),
        "GATEWAY_BASE_URLS": json.dumps(base_urls(deployments)),
        KEY_ENV: PROVIDER_KEY,
        "GATEWAY_REDIS_TIMEOUT": "2",
        "GATEWAY_RETRIES": "0",
        "GATEWAY_CONSOLE": "1",
    }
    with two_replicas(sim.url, tmp, env) as replicas:
        yield replicas


@pytest.fixture(autouse=True)
def _healthy(deployments):
    for d in deployments:
        d.set("")
    yield
    for d in deployments:
        d.set("")


def served(url: str, model: str, **extra: Any) -> str:
    """The provider entry (deployment) that served a turn sent to the replica at `url`."""
    response = httpx.post(f"{url}/v1/complete", json=turn(model, **extra), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["provider"]


def streamed(url: str, model: str, **extra: Any) -> str:
    """The deployment that served a turn streamed from the replica at `url` (`/v1/stream`), read up to its
    terminal event."""
    provider = None
    with httpx.stream("POST", f"{url}/v1/stream", json=turn(model, **extra), timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event["type"] == "start":
                provider = event["provider"]
            if event["type"] in ("done", "error"):
                assert event["type"] == "done", event
                break
    assert provider is not None
    return provider


def throttle_until_tried(url: str, pool: str, rep_a: Deployment, seconds: int) -> None:
    """Make rep-a answer 429 (Retry-After `seconds`), then send turns of `pool` to the replica at `url` until
    one tries rep-a: that turn moves on to rep-b, and rep-a is cooled."""
    rep_a.set(THROTTLED.format(seconds=seconds))
    before = rep_a.count
    for _ in range(40):
        assert served(url, pool) == "rep-b"
        if rep_a.count > before:
            break
    assert rep_a.count == before + 1


def test_a_429_cools_the_deployment_on_both_replicas(cluster, deployments):
    a_url, b_url, redis = cluster["a"].url, cluster["b"].url, cluster["redis"].client()
    rep_a = deployments[0]
    throttle_until_tried(a_url, "shared2", rep_a, 20)
    cooled_until = float(redis.hget("gw:pool:dep:rep-a/text;pool=shared2", "cool"))  # the provider/model's
    assert cooled_until > time.time() * 1000
    rep_a.set("")
    sent = rep_a.count
    assert {served(b_url, "shared2") for _ in range(20)} == {"rep-b"}  # replica b sends rep-a nothing
    assert rep_a.count == sent
    assert time.time() * 1000 < cooled_until  # (all of those turns ran while the cooldown held)
    metrics = httpx.get(f"{a_url}/metrics").text
    assert 'gateway_pool_cooldowns_total{deployment="rep-a/text",pool="shared2",reason="rate_limited"} 1.0' in metrics


def test_an_rpm_quota_holds_across_both_replicas(cluster, deployments):
    urls = [cluster["a"].url, cluster["b"].url]
    before = deployments[0].count
    got = [served(urls[i % 2], "quota2") for i in range(14)]
    # rep-a weighs 1000 to rep-b's 1, yet exactly its quota reached it across both replicas: the rest were
    # routed around it before its vendor could answer 429.
    assert got.count("rep-a") == 5 and deployments[0].count - before == 5, got
    assert set(got[-5:]) == {"rep-b"}, got


def test_least_in_flight_evens_50_slow_streams_across_three_deployments(cluster, deployments):
    for d in deployments:
        d.set(";delay_ms=150")  # each stream lasts about a second: all 50 are in flight together
    before = {d.name: d.count for d in deployments}
    urls = [cluster["a"].url, cluster["b"].url]

    def stream(index: int) -> int:
        with httpx.stream("POST", f"{urls[index % 2]}/v1/stream", json=turn("even3"), timeout=60) as response:
            response.read()
            return response.status_code

    with ThreadPoolExecutor(50) as workers:
        assert set(workers.map(stream, range(50))) == {200}
    spread = [d.count - before[d.name] for d in deployments]
    assert sum(spread) == 50
    assert max(spread) - min(spread) <= 4, spread  # 16/17/17 when evened exactly


def test_a_concurrency_cap_holds_across_both_replicas(cluster, deployments):
    for d in deployments:
        d.set(";delay_ms=150")  # each stream lasts about a second: all six are in flight together
    before = {d.name: d.count for d in deployments}
    urls = [cluster["a"].url, cluster["b"].url]
    with ThreadPoolExecutor(6) as workers:
        got = list(workers.map(lambda i: streamed(urls[i % 2], "capped2"), range(6)))
    # rep-a weighs 1000 to rep-b's 1, yet it had at most its two attempts in flight, whichever replica sent them
    assert deployments[0].count - before["rep-a"] == 2 and got.count("rep-b") == 4, got


def test_a_conversation_keeps_its_deployment_on_either_replica_and_moves_when_cooled(cluster, deployments):
    urls = [cluster["a"].url, cluster["b"].url]
    options = {"throttleMs": 0, "sessionId": f"conv-{marker()}"}
    home = {served(urls[i % 2], "sticky3", options=options) for i in range(10)}
    assert len(home) == 1, home
    [first] = home
    by_name = {d.name: d for d in deployments}
    by_name[first].set(THROTTLED.format(seconds=30))
    moved = served(urls[0], "sticky3", options=options)
    assert moved != first
    by_name[first].set("")
    assert {served(urls[i % 2], "sticky3", options=options) for i in range(8)} == {moved}


def test_a_conversation_keeps_its_deployment_at_agent_pace_across_replicas(cluster, deployments):
    for d in deployments:  # each upstream stays open after its terminal event (the late-frame grace runs on)
        d.set(";fault=hang;at=after_terminal")
    urls = [cluster["a"].url, cluster["b"].url]
    options = {"throttleMs": 0, "sessionId": f"agent-{marker()}"}
    # An agent sends each turn the moment it has the previous answer (its stream's terminal event), to either
    # replica.
    placed = [streamed(urls[i % 2], "sticky3", options=options) for i in range(12)]
    assert len(set(placed)) == 1, placed


def pool_view(url: str, pool: str) -> dict[str, Any]:
    """`GET /v1/console/pools` of the replica at `url`: the named pool's view, its deployments by name."""
    response = httpx.get(f"{url}/v1/console/pools", timeout=30)
    assert response.status_code == 200, response.text
    [view] = [p for p in response.json()["pools"] if p["name"] == pool]
    return {**view, "deployments": {d["name"]: d for d in view["deployments"]}}


def test_a_429_on_replica_a_shows_as_cooled_in_replica_b_console(cluster, deployments):
    a_url, b_url = cluster["a"].url, cluster["b"].url
    before = pool_view(b_url, "console2")
    assert before["strategy"] == "weighted" and before["shared"] is True
    assert before["deployments"]["rep-a/text"]["cooldown"] == {
        "cooling": False,
        "until": None,
        "reason": None,
        "streak": 0,
    }
    throttle_until_tried(a_url, "console2", deployments[0], 30)
    view = pool_view(b_url, "console2")  # the other replica
    cooled, healthy = view["deployments"]["rep-a/text"], view["deployments"]["rep-b/text"]
    assert view["shared"] is True
    assert cooled["cooldown"]["cooling"] is True and cooled["cooldown"]["reason"] == "rate_limited"
    assert cooled["cooldown"]["streak"] == 1 and cooled["cooldown"]["until"] > time.time() * 1000
    assert (cooled["provider"], cooled["model"], cooled["weight"], cooled["configured"]) == (
        "rep-a",
        "text;pool=console2",
        1.0,
        True,
    )
    assert cooled["rpm"] == {"used": 1, "limit": 1000}  # the one request replica a sent it, counted in Redis
    assert healthy["cooldown"]["cooling"] is False and healthy["weight"] == 2.0
    assert healthy["ttftMs"] is not None and healthy["ttftMs"] > 0 and healthy["inFlight"] == 0
    assert healthy["tpm"]["used"] > 0 and healthy["tpm"]["limit"] is None


def test_a_long_user_id_is_stored_bounded_and_still_keeps_its_conversation(cluster):
    urls, redis = [cluster["a"].url, cluster["b"].url], cluster["redis"].client()
    options = {"throttleMs": 0, "metadata": {"userId": marker() + "u" * 300_000}}
    home = {served(urls[i % 2], "sticky3", options=options) for i in range(4)}
    assert len(home) == 1, home
    keys = redis.keys("gw:pool:sticky3:aff:*")
    assert keys and max(len(key) for key in keys) < 200  # the 300 kB id is stored as its hash
    assert max(redis.memory_usage(key) for key in keys) < 1_000
