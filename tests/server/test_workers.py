"""`python -m app` with `GATEWAY_WORKERS=2` and a Redis of the test's own: uvicorn's supervisor runs two worker
processes on one port, and what they count together stays exact. Turns go over fresh connections, which the
kernel hands to either worker; which worker admitted a turn is read from its ledger record (`instance_id` names
the process), and a burst is tried again (a bounded number of rounds) until admitted turns landed on both."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.conformance import check_frames, parse_sse
from tests.conftest import turn
from tests.policy.test_keys_policy import bearer, digest
from tests.procs import GatewayProcess, free_port, wait_until
from tests.redisproc import RedisServer
from tests.resume_client import read_some, resume
from tests.telemetry.test_metrics import scrape

# Bursts tried until the admitted turns were served by both workers: an idle worker may accept a whole burst
# that arrives at once (on an idle machine the concurrency test needed 1 to 4 rounds).
ROUNDS = 20
RPM_KEYS = [f"rpm{round_}" for round_ in range(ROUNDS)]
CONC_KEYS = [f"conc{round_}" for round_ in range(ROUNDS)]


@pytest.fixture(scope="module")
def workers(sim, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("workers")
    policies = {
        **{name: {"requests_per_minute": 4} for name in RPM_KEYS},
        **{name: {"concurrent_streams": 3} for name in CONC_KEYS},
        "plain": {},
    }
    keys = [{"name": name, "sha256": digest(f"sk-{name}"), **policy} for name, policy in policies.items()]
    (tmp / "keys.json").write_text(json.dumps({"keys": keys}))
    redis_server = RedisServer().start()
    ledger = tmp / "gateway.db"
    gateway = GatewayProcess(
        sim.url,
        database_url=f"sqlite:///{ledger}",
        GATEWAY_WORKERS="2",
        GATEWAY_REDIS_URL=redis_server.url,
        GATEWAY_REDIS_FAIL_OPEN="false",
        GATEWAY_REDIS_TIMEOUT="2",  # a bound for a loaded machine, not a wait
        GATEWAY_KEYS_FILE=str(tmp / "keys.json"),
        PROMETHEUS_MULTIPROC_DIR=str(tmp / "metrics"),
    )
    try:
        gateway.wait_ready()
        yield {"gateway": gateway, "ledger": ledger, "metrics": tmp / "metrics"}
    finally:
        gateway.proc.terminate()  # the supervisor stops its workers (a SIGKILL would leave them running)
        try:
            gateway.proc.wait(60)
        finally:
            gateway.stop()
            redis_server.stop()


def _fresh_client(**kwargs: Any) -> httpx.AsyncClient:
    """Every request on a new connection, so the kernel picks the worker each time."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
    return httpx.AsyncClient(timeout=120, limits=limits, **kwargs)


def _records(ledger: Path, key: str | None = None) -> list[tuple[str, str | None]]:
    """(instance_id, outcome) of the ledger's records, of one key or all."""
    with sqlite3.connect(ledger) as db:
        if key is None:
            return db.execute("SELECT instance_id, outcome FROM gateway_requests").fetchall()
        return db.execute("SELECT instance_id, outcome FROM gateway_requests WHERE api_key_id = ?", (key,)).fetchall()


def test_the_supervisor_serves_two_workers_and_their_metrics_share_a_directory(workers):
    served = set()
    for _ in range(ROUNDS):

        async def burst() -> None:
            async with _fresh_client() as client:
                replies = await asyncio.gather(
                    *(
                        client.post(
                            f"{workers['gateway'].url}/v1/complete",
                            json=turn("anthropic/text"),
                            headers=bearer("sk-plain"),
                        )
                        for _ in range(12)
                    )
                )
            assert [r.status_code for r in replies] == [200] * 12

        asyncio.run(burst())
        wait_until(
            lambda: (
                len(_records(workers["ledger"], "plain")) % 12 == 0
                and all(o for _, o in _records(workers["ledger"], "plain"))
            )
        )
        served = {instance for instance, _ in _records(workers["ledger"], "plain")}
        if len(served) == 2:
            break
    assert len(served) == 2, "two worker processes served turns"
    files = {path.name for path in workers["metrics"].iterdir()}
    assert len({name.rsplit("_", 1)[-1] for name in files if name.startswith("counter_")}) == 2, files


def test_rpm_limit_holds_across_both_workers(workers):
    """A key with 4 requests a minute, 10 one after the other, each on a new connection (an idle worker accepts
    a whole burst that arrives at once, so each request is a fresh pick of worker this way; the concurrency test
    below covers turns at once): exactly 4 admitted in every round, whichever worker took each."""
    for key in RPM_KEYS:

        async def burst() -> list[int]:
            async with _fresh_client() as client:
                replies = [
                    await client.post(
                        f"{workers['gateway'].url}/v1/complete",
                        json=turn("anthropic/text"),
                        headers=bearer(f"sk-{key}"),
                    )
                    for _ in range(10)
                ]
            for reply in replies:
                if reply.status_code == 429:
                    assert reply.json()["error"]["type"] == "rate_limit_rpm"
            return [reply.status_code for reply in replies]

        statuses = asyncio.run(burst())
        assert sorted(statuses) == [200] * 4 + [429] * 6, statuses
        wait_until(lambda: len(_records(workers["ledger"], key)) == 4)
        if len({instance for instance, _ in _records(workers["ledger"], key)}) == 2:
            return
    pytest.fail(f"in {ROUNDS} rounds the admitted turns never landed on both workers")


def test_concurrency_limit_holds_across_both_workers(workers):
    """A key with 3 concurrent streams, 12 slow streams at once and held open until all are answered: exactly 3
    admitted in every round."""
    url = workers["gateway"].url
    for key in CONC_KEYS:

        async def burst() -> list[int]:
            answered = 0
            everyone = asyncio.Event()
            statuses: list[int] = []

            async def one(client: httpx.AsyncClient) -> None:
                nonlocal answered
                body = turn("anthropic/slow;n=3000;delay_ms=20")
                async with client.stream("POST", f"{url}/v1/stream", json=body, headers=bearer(f"sk-{key}")) as reply:
                    statuses.append(reply.status_code)
                    if reply.status_code == 429:
                        assert json.loads(await reply.aread())["error"]["type"] == "concurrency_limit"
                    answered += 1
                    if answered == 12:
                        everyone.set()
                    await everyone.wait()  # admitted streams stay open until every request has its answer

            async with _fresh_client() as client:
                await asyncio.wait_for(asyncio.gather(*(one(client) for _ in range(12))), 180)
            return statuses

        statuses = asyncio.run(burst())
        assert statuses.count(200) == 3 and statuses.count(429) == 9, statuses
        wait_until(
            lambda: len(_records(workers["ledger"], key)) == 3 and all(o for _, o in _records(workers["ledger"], key))
        )
        if len({instance for instance, _ in _records(workers["ledger"], key)}) == 2:
            return
    pytest.fail(f"in {ROUNDS} rounds the admitted streams never landed on both workers")


def test_a_record_read_right_after_its_turn_shows_it_done_whichever_worker_answers(workers):
    """Each turn and the read of its record on new connections: the read may reach the worker that did not run
    the turn, whose records read waits for the other's queued writes (`app.ledger.shared_flush`). Without that,
    about 2 reads in 100 found the record missing or still open."""
    url = workers["gateway"].url
    outcomes = []
    for _ in range(80):
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=60) as client:
            turned = client.post(f"{url}/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-plain"))
            assert turned.status_code == 200
            read = client.get(f"{url}/v1/requests/{turned.headers['x-request-id']}", headers=bearer("sk-plain"))
            outcomes.append((read.status_code, read.json().get("outcome")))
    assert outcomes == [(200, "done")] * 80


def test_a_resumable_stream_resumed_on_a_new_connection_gets_exactly_the_rest(workers):
    """Disconnect after 50 events, resume on a new connection (either worker): the rest without gap or duplicate,
    one terminal, the record `resumed` once; four streams, so resumptions reach the worker that does not run the
    turn (its copy of the events is the one in Redis)."""
    url, plain = workers["gateway"].url, bearer("sk-plain")
    for _ in range(4):
        body = turn("anthropic/slow;n=120;delay_ms=5")
        body["options"]["resumable"] = True
        request_id, head = read_some(url, body, plain, 50)
        rest = resume(url, request_id, plain, head[-1].id)
        assert rest.status_code == 200, rest.text
        tail = parse_sse(rest.text)
        assert tail[0].id == "51"
        events = check_frames(head + tail)  # ids 1 … N without gap or duplicate, one terminal
        assert [event["type"] for event in events].count("done") == 1 and events[-1]["type"] == "done"
        record = httpx.get(f"{url}/v1/requests/{request_id}", headers=plain, timeout=30).json()
        assert (record["outcome"], record["resumed"]) == ("done", 1)


def test_metrics_of_either_worker_count_every_turn_and_every_record_completes(workers):
    """Whichever worker answers `/metrics` (each scrape on a new connection), it counts the turns of both: every
    turn of this module's tests, as many as the ledger has records."""
    url = workers["gateway"].url

    async def burst() -> None:
        async with _fresh_client() as client:
            await asyncio.gather(
                *(
                    client.post(f"{url}/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-plain"))
                    for _ in range(12)
                )
            )

    asyncio.run(burst())

    def turns_counted() -> float:
        """`gateway_requests_total` over every label set, scraped on a new connection (`scrape`: `httpx.get`)."""
        return sum(count for (name, _), count in scrape(url).items() if name == "gateway_requests_total")

    def written() -> bool:
        """Every turn's record written and settled (records are written from each worker's queue, a moment later)."""
        records = _records(workers["ledger"])
        return all(outcome for _, outcome in records) and len(records) == turns_counted()

    wait_until(written)
    records = _records(workers["ledger"])
    outcomes = {outcome for _, outcome in records}
    assert outcomes <= {"done", "aborted"}, outcomes  # the held streams were closed by their clients
    assert [turns_counted() for _ in range(8)] == [len(records)] * 8


def test_a_worker_of_uvicorn_workers_without_redis_refuses_to_start_in_one_line(sim):
    """The container's path (uvicorn run directly, `GATEWAY_WORKERS` exported by the entrypoint): the app's own
    start-up refuses several workers without Redis, so the server exits with its start-up failure status."""
    port = free_port()
    gateway = GatewayProcess(
        sim.url,
        port=port,
        args=["-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port", str(port)],
        GATEWAY_WORKERS="2",
    )
    try:
        code = gateway.proc.wait(180)
    finally:
        gateway.stop()
    stderr = gateway.proc.stderr.read().decode()
    assert code == 3, stderr
    refusals = [line for line in stderr.splitlines() if "GATEWAY_WORKERS=2 needs GATEWAY_REDIS_URL" in line]
    assert len(refusals) == 1 and "Traceback" not in stderr, stderr


def test_workers_stop_when_their_supervisor_is_killed(sim, tmp_path):
    """SIGKILL leaves the supervisor no time to stop its workers: each asked to be sent SIGTERM when its parent
    dies, and stops (drains) rather than keep serving on the port."""
    import psutil

    redis_server = RedisServer().start()
    gateway = GatewayProcess(
        sim.url,
        database_url=f"sqlite:///{tmp_path}/gateway.db",
        GATEWAY_WORKERS="2",
        GATEWAY_REDIS_URL=redis_server.url,
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    workers: list[psutil.Process] = []
    try:
        gateway.wait_ready()
        children = psutil.Process(gateway.proc.pid).children()
        workers = [child for child in children if "spawn_main" in " ".join(child.cmdline())]
        assert len(workers) == 2
        gateway.stop()  # SIGKILL
        _, alive = psutil.wait_procs(workers, timeout=60)
        assert alive == [], alive
    finally:
        for worker in workers:  # what a failed check left behind (no longer this test's children)
            if worker.is_running():
                worker.kill()
        gateway.stop()
        redis_server.stop()
