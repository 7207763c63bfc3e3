"""Two gateway processes sharing one Redis (their own redis-server) and one ledger: per-key limits hold across
both, under bursts larger than a Redis connection pool and through a Redis stall (SIGSTOP/SIGCONT); budgets
hold under concurrency (turns in flight reserve their estimate); spend survives Redis restarting empty
(rebuilt from the ledger), and a Redis that is down or silent fails open or closed as configured without
hanging a request."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import marker, turn
from tests.procs import GatewayProcess, free_port, wait_until
from tests.redisproc import two_replicas
from tests.policy.test_keys_policy import bearer, digest


def write_keys(path: Path, extra: dict[str, dict[str, Any]] | None = None) -> None:
    policies: dict[str, dict[str, Any]] = {
        "rpm10": {"requests_per_minute": 10},
        "conc5": {"concurrent_streams": 5},
        "spender": {},
        "prober": {},
        "tpm": {"tokens_per_minute": 1},
        "conc2": {"concurrent_streams": 2},
        "stalled": {"concurrent_streams": 2, "requests_per_minute": 30},
        **(extra or {}),
    }
    keys = [{"name": name, "sha256": digest(f"sk-{name}"), **policy} for name, policy in policies.items()]
    path.write_text(json.dumps({"keys": keys}))


@pytest.fixture(scope="module")
def cluster(sim, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("replicas")
    keys_file = tmp / "keys.json"
    write_keys(keys_file)
    env = {
        "GATEWAY_KEYS_FILE": str(keys_file),
        "GATEWAY_KEYS_RELOAD_INTERVAL": "3600",  # reloads in these tests come from SIGHUP
        "GATEWAY_REDIS_TIMEOUT": "2",  # the bound also covers the event loop's lag, large under a 300-turn burst
        "GATEWAY_REDIS_FAIL_OPEN": "false",
    }
    with two_replicas(sim.url, tmp, env) as replicas:
        yield {**replicas, "keys_file": keys_file}


def _post(url: str, key: str, model: str = "anthropic/text", path: str = "/v1/complete") -> httpx.Response:
    return httpx.post(f"{url}{path}", json=turn(model, marker()), headers=bearer(key), timeout=60)


def test_rpm_limit_holds_across_replicas(cluster):
    urls = [cluster["a"].url, cluster["b"].url]

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=60) as client:
            responses = await asyncio.gather(
                *(
                    client.post(f"{urls[i % 2]}/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-rpm10"))
                    for i in range(20)
                )
            )
        for response in responses:
            if response.status_code == 429:
                assert response.json()["error"]["type"] == "rate_limit_rpm"
                assert 1 <= int(response.headers["retry-after"]) <= 60
        return [r.status_code for r in responses]

    statuses = asyncio.run(burst())
    assert sorted(statuses) == [200] * 10 + [429] * 10, statuses
    # Both replicas took part in admitting and refusing.
    assert {s for i, s in enumerate(statuses) if i % 2 == 0} and {s for i, s in enumerate(statuses) if i % 2 == 1}


def test_concurrency_limit_holds_across_replicas_under_a_burst(cluster):
    urls = [cluster["a"].url, cluster["b"].url]
    answered = 0

    async def burst() -> list[int]:
        done = asyncio.Event()
        statuses: list[int] = []

        async def one(client: httpx.AsyncClient, index: int) -> None:
            nonlocal answered
            body = turn("anthropic/slow;n=3000;delay_ms=20")
            async with client.stream(
                "POST", f"{urls[index % 2]}/v1/stream", json=body, headers=bearer("sk-conc5")
            ) as r:
                statuses.append(r.status_code)
                if r.status_code == 429:
                    assert json.loads(await r.aread())["error"]["type"] == "concurrency_limit"
                answered += 1
                if answered == 100:
                    done.set()
                await done.wait()  # admitted streams stay open until every request has its answer

        limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            await asyncio.wait_for(asyncio.gather(*(one(client, i) for i in range(100))), 180)
        return statuses

    statuses = asyncio.run(burst())
    assert statuses.count(200) == 5 and statuses.count(429) == 95, statuses
    # The closed streams released their leases on both replicas: the key can stream again.
    redis = cluster["redis"].client()
    wait_until(lambda: redis.zcard("gw:conc:conc5") == 0)
    assert _post(cluster["b"].url, "sk-conc5").status_code == 200


async def _hold_streams(targets: list[str], key: str, on_refusal=None) -> list[int]:
    """Start one slow `/v1/stream` turn per target URL at once; admitted streams stay open until every request has
    its answer (so every admission sees the others in flight). The statuses, in target order."""
    done = asyncio.Event()
    statuses: dict[int, int] = {}

    async def one(client: httpx.AsyncClient, index: int) -> None:
        body = turn("anthropic/slow;n=3000;delay_ms=20")
        async with client.stream("POST", f"{targets[index]}/v1/stream", json=body, headers=bearer(key)) as r:
            statuses[index] = r.status_code
            if r.status_code != 200 and on_refusal is not None:
                on_refusal(r, json.loads(await r.aread()))
            if len(statuses) == len(targets):
                done.set()
            await done.wait()

    limits = httpx.Limits(max_connections=len(targets) + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=180, limits=limits) as client:
        await asyncio.wait_for(asyncio.gather(*(one(client, i) for i in range(len(targets)))), 300)
    return [statuses[i] for i in range(len(targets))]


def test_a_burst_larger_than_the_redis_pool_still_holds_the_concurrency_limit(cluster):
    """300 concurrent turns of a concurrency-2 key at one replica: more admissions at once than the Redis client
    has connections. They wait for a connection (bounded by the Redis timeout) instead of counting as Redis
    down, so exactly 2 are served and the rest get 429 (not 503 `limits_unavailable`, not served unlimited)."""
    kinds: list[str] = []

    def refused(response: httpx.Response, body: dict) -> None:
        kinds.append(body["error"]["type"])
        assert response.headers["retry-after"] == "1"

    statuses = asyncio.run(_hold_streams([cluster["a"].url] * 300, "sk-conc2", refused))
    assert statuses.count(200) == 2 and statuses.count(429) == 298, sorted(set(statuses))
    assert set(kinds) == {"concurrency_limit"}
    redis = cluster["redis"].client()
    wait_until(lambda: redis.zcard("gw:conc:conc2") == 0)


def test_an_admission_given_up_during_a_redis_stall_leaves_no_trace(cluster):
    """Redis stops (SIGSTOP) while both replicas admit turns of a key: they give up after the timeout (503, the
    cluster fails closed), and their admission scripts run when Redis wakes (SIGCONT). What those scripts took
    (a lease, an rpm entry) is undone, so the key is not refused with nothing running: it gets exactly its 2
    concurrent streams again, long before the leases' TTL (30 s) or the rpm window (60 s) would have freed it."""
    redis_server = cluster["redis"]
    redis = redis_server.client()
    urls = [cluster["a"].url, cluster["b"].url]

    async def stalled_burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(
                *(
                    client.post(f"{urls[i % 2]}/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-stalled"))
                    for i in range(6)
                )
            )

    redis_server.proc.send_signal(signal.SIGSTOP)
    try:
        refused = asyncio.run(stalled_burst())
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
    assert [r.status_code for r in refused] == [503] * 6
    assert {r.json()["error"]["type"] for r in refused} == {"limits_unavailable"}
    assert redis.ping()  # Redis is awake: the stalled scripts (queued on the replicas' connections) have run
    wait_until(lambda: redis.zcard("gw:conc:stalled") == 0 and redis.zcard("gw:rpm:stalled") == 0, timeout=15)
    statuses = asyncio.run(_hold_streams([urls[0], urls[1], urls[0]], "sk-stalled"))
    assert sorted(statuses) == [200, 200, 429], statuses


def test_budget_holds_under_concurrency_across_replicas(cluster):
    """50 concurrent turns across both replicas against a day budget that covers one turn: each turn in flight
    reserves its estimated cost at admission, so one is served (before: 30) and the spend stays within the
    budget; the others get 429 `budget_exceeded`."""
    a, b = cluster["a"], cluster["b"]
    probe = httpx.post(
        f"{a.url}/v1/complete", json=turn("anthropic/text", "same"), headers=bearer("sk-prober"), timeout=60
    )
    cost = probe.json()["usage"]["cost"]["total"]
    budget = cost * 1.05
    write_keys(cluster["keys_file"], {"burst": {"budget_usd_per_day": budget}, "reload5": {}})
    _sighup_both(cluster, "reload5")

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=60)) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{(a.url, b.url)[i % 2]}/v1/complete",
                        json=turn("anthropic/text", "same"),
                        headers=bearer("sk-burst"),
                    )
                    for i in range(50)
                )
            )

    responses = asyncio.run(burst())
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 1 and statuses.count(429) == 49, statuses
    assert {r.json()["error"]["type"] for r in responses if r.status_code == 429} == {"budget_exceeded"}
    redis = cluster["redis"].client()
    wait_until(lambda: redis.hlen("gw:resv:burst") == 0 and redis.zcard("gw:conc:burst") == 0)
    spent = float(redis.get(next(redis.scan_iter("gw:spend:burst:d:*"))))
    assert spent == pytest.approx(cost, rel=1e-6) and spent <= budget


def test_overspend_is_bounded_by_what_the_turns_in_flight_cost_beyond_their_estimate(cluster):
    """Rounds of 20 concurrent turns across both replicas, with `concurrent_streams = 3` and a day budget of 4.5
    turns: the spend ends at most `budget + Σ (cost − estimate)` over the turns in flight at the last
    admission (at most 3). Every turn here costs what the latest did, so: never above the budget, and never
    more than 4 turns served; every refusal is the concurrency limit or the budget."""
    a, b = cluster["a"], cluster["b"]
    probe = httpx.post(
        f"{a.url}/v1/complete", json=turn("anthropic/text", "same"), headers=bearer("sk-prober"), timeout=60
    )
    cost = probe.json()["usage"]["cost"]["total"]
    budget = cost * 4.5
    write_keys(cluster["keys_file"], {"rounds": {"budget_usd_per_day": budget, "concurrent_streams": 3}, "reload6": {}})
    _sighup_both(cluster, "reload6")

    async def round_of(count: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=count + 5)) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{(a.url, b.url)[i % 2]}/v1/complete",
                        json=turn("anthropic/text", "same"),
                        headers=bearer("sk-rounds"),
                    )
                    for i in range(count)
                )
            )

    responses = [r for _ in range(4) for r in asyncio.run(round_of(20))]
    served = [r for r in responses if r.status_code == 200]
    assert 1 <= len(served) <= 4, len(served)
    assert {r.json()["error"]["type"] for r in responses if r.status_code != 200} <= {
        "budget_exceeded",
        "concurrency_limit",
    }
    assert all(r.json()["usage"]["cost"]["total"] == pytest.approx(cost, rel=1e-9) for r in served)
    redis = cluster["redis"].client()
    wait_until(lambda: redis.hlen("gw:resv:rounds") == 0 and redis.zcard("gw:conc:rounds") == 0)
    spent = float(redis.get(next(redis.scan_iter("gw:spend:rounds:d:*"))))
    assert spent == pytest.approx(len(served) * cost, rel=1e-6) and spent <= budget


def _sighup_both(cluster, probe_name: str) -> None:
    """Reload the keys file on both replicas with SIGHUP; `probe_name` is a key only the new file has."""
    for proc in (cluster["a"], cluster["b"]):
        proc.proc.send_signal(signal.SIGHUP)
    for proc in (cluster["a"], cluster["b"]):
        wait_until(lambda: httpx.get(f"{proc.url}/v1/models", headers=bearer(f"sk-{probe_name}")).status_code == 200)


def test_budget_shared_and_rebuilt_after_redis_restarts_empty(cluster):
    a, b, redis_server = cluster["a"], cluster["b"], cluster["redis"]
    probe = _post(a.url, "sk-prober")
    assert probe.status_code == 200
    cost = probe.json()["usage"]["cost"]["total"]
    assert cost > 0
    # A day budget just above one turn's cost: the first turn (on A) is served, the next (on B) is stopped.
    write_keys(cluster["keys_file"], {"spender": {"budget_usd_per_day": cost * 1.05}, "reload1": {}})
    _sighup_both(cluster, "reload1")
    redis = redis_server.client()
    day_key = next(iter(redis.scan_iter("gw:spend:spender:d:*")), None)
    assert day_key is None  # nothing seeded yet

    assert _post(a.url, "sk-spender").status_code == 200
    wait_until(lambda: float(redis.get(next(redis.scan_iter("gw:spend:spender:d:*"))) or 0) >= cost * 0.99)
    # Replica B served no turn of this key itself; it refuses because A's turn is counted.
    refused = _post(b.url, "sk-spender")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "budget_exceeded"
    assert int(refused.headers["retry-after"]) >= 1

    # Redis restarts empty: the counters are rebuilt from the ledger, the budget still holds on both.
    redis_server.restart_empty()
    assert redis_server.client().dbsize() == 0
    for proc in (b, a):
        again = _post(proc.url, "sk-spender")
        assert again.status_code == 429, again.text
        assert again.json()["error"]["type"] == "budget_exceeded"
    rebuilt = float(redis_server.client().get(next(redis_server.client().scan_iter("gw:spend:spender:d:*"))))
    assert rebuilt == pytest.approx(cost, rel=1e-6)


def test_tokens_per_minute_shared(cluster):
    redis = cluster["redis"].client()
    for _ in range(2):  # tokens count per clock minute: a minute that turns in between starts at zero
        minute = int(time.time() // 60)
        assert _post(cluster["a"].url, "sk-tpm").status_code == 200
        wait_until(lambda: int(redis.get(f"gw:tpm:tpm:{minute}") or 0) > 0 or int(time.time() // 60) != minute)
        refused = _post(cluster["b"].url, "sk-tpm")
        if refused.status_code == 200 and int(time.time() // 60) != minute:
            continue
        break
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_tpm"


# ---------------------------------------------------------------------------------------------- Redis faults


class SilentServer:
    """Accepts TCP connections and never answers: a Redis that hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.mark.parametrize("fault", ["down", "silent"])
def test_redis_down_or_silent_fails_open_or_closed(gateway_factory, tmp_path, fault):
    keys_file = tmp_path / "keys.json"
    write_keys(keys_file)
    silent = SilentServer() if fault == "silent" else None
    port = silent.port if silent else free_port()  # nothing listens on a fresh free port
    url = f"redis://127.0.0.1:{port}/0"
    try:
        open_gw = gateway_factory(keys_file=str(keys_file), redis_url=url, redis_timeout=0.3, redis_fail_open=True)
        closed_gw = gateway_factory(keys_file=str(keys_file), redis_url=url, redis_timeout=0.3, redis_fail_open=False)
        started = time.monotonic()
        served = open_gw.stream(turn("anthropic/text"), headers=bearer("sk-rpm10"))
        assert served.status == 200 and served.terminal["type"] == "done"  # fail open: limits skipped, stream works
        refused = closed_gw.http.post("/v1/stream", json=turn("anthropic/text"), headers=bearer("sk-rpm10"))
        assert refused.status_code == 503 and refused.json()["error"]["type"] == "limits_unavailable"
        assert refused.headers["retry-after"] == "1"
        # A key without store-backed limits never touches Redis.
        assert closed_gw.stream(turn("anthropic/text"), headers=bearer("sk-spender")).status == 200
        # Charging a settled turn's tokens fails in the background (retried, each try bounded); the stream is not
        # held up.
        charged = open_gw.stream(turn("anthropic/text"), headers=bearer("sk-tpm"))
        assert charged.status == 200 and charged.terminal["type"] == "done"
        open_gw.job(charged.headers["x-request-id"])
        wait_until(lambda: 'gateway_limit_store_errors_total{operation="charge"}' in open_gw.http.get("/metrics").text)
        # A resumable stream streams from this replica while its copy to Redis fails.
        body = turn("anthropic/slow;n=20;delay_ms=5")
        body["options"]["resumable"] = True
        resumable = open_gw.stream(body, headers=bearer("sk-spender"))
        assert resumable.status == 200 and resumable.terminal["type"] == "done"
        assert time.monotonic() - started < 20  # every Redis call bounded by the timeout, nothing hangs
        assert 'gateway_limit_store_errors_total{operation="admit"}' in closed_gw.http.get("/metrics").text
        errors = open_gw.http.get("/metrics").text
        assert 'gateway_limit_store_errors_total{operation="charge"}' in errors
    finally:
        if silent:
            silent.close()


def test_a_crashed_replicas_leases_expire(cluster, sim):
    """Replica C holds every concurrency slot of a key and is killed (-9): its leases are not released, so
    the others refuse the key until the leases' TTL runs out, then admit it again."""
    redis = cluster["redis"].client()
    wait_until(lambda: redis.zcard("gw:conc:conc5") == 0)
    env = {
        "GATEWAY_KEYS_FILE": str(cluster["keys_file"]),
        "GATEWAY_REDIS_URL": cluster["redis"].url,
        "GATEWAY_REDIS_LEASE_TTL": "3",
    }
    c = GatewayProcess(sim.url, **env)
    opened = []
    client = httpx.Client(timeout=30)
    try:
        c.wait_ready()
        for _ in range(5):
            cm = client.stream(
                "POST", f"{c.url}/v1/stream", json=turn("anthropic/slow;n=3000;delay_ms=20"), headers=bearer("sk-conc5")
            )
            response = cm.__enter__()
            assert response.status_code == 200
            opened.append(cm)
        c.proc.kill()
        c.proc.wait(10)
        killed = time.monotonic()
        refused = _post(cluster["b"].url, "sk-conc5", path="/v1/stream")
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "concurrency_limit"
        wait_until(lambda: _post(cluster["b"].url, "sk-conc5").status_code == 200, timeout=30)
        assert time.monotonic() - killed >= 1.0  # not released: expired (TTL 3 s, renewed every second until the kill)
    finally:
        for cm in opened:
            try:
                cm.__exit__(None, None, None)
            except httpx.HTTPError:
                pass
        client.close()
        c.stop()


def test_redis_down_and_fail_open_enforces_each_keys_limits_on_this_replica(gateway_factory, tmp_path):
    """Fail-open while Redis is unreachable means this replica's own limits (N replicas: at most N times a limit),
    not none: the rpm and concurrency of a key are enforced by the replica alone, and a gauge says so."""
    keys_file = tmp_path / "keys.json"
    write_keys(keys_file, {"rpm2": {"requests_per_minute": 2}, "conc1": {"concurrent_streams": 1}})
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    gw = gateway_factory(keys_file=str(keys_file), redis_url=url, redis_timeout=0.3, redis_fail_open=True)
    statuses = [gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-rpm2")) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 429]  # before: 200 each, every limit skipped
    assert statuses[2].json()["error"]["type"] == "rate_limit_rpm"
    assert "gateway_limits_local_fallback 1.0" in gw.http.get("/metrics").text
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/stream", json=turn("anthropic/slow;n=2000;delay_ms=20", marker()), headers=bearer("sk-conc1")
        ) as held:
            lines = held.iter_lines()
            while not next(lines).startswith("data:"):
                pass
            second = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-conc1"))
            assert second.status_code == 429 and second.json()["error"]["type"] == "concurrency_limit"
    wait_until(lambda: not gw.state.limits.local_leases)  # the stream's end released its local hold
    assert gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-conc1")).status_code == 200
