"""Request records (CONTRACT §5) on both stores: what each outcome records, crash recovery, concurrency.

Every test runs against SQLite (a temp file) and PostgreSQL (a schema of its own), via `ledger_url`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import types
from typing import Any, Iterator

import httpx
import pytest

import orjson

from app.catalog import Catalog
from app.core.dispatcher import Dispatcher
from app.ledger import LedgerObserver, open_ledger, pending_size, postgres, sqlite
from app.ledger.base import INTERRUPTED_MESSAGE, encode_record
from app.settings import Settings
from tests.conftest import marker, run_async, turn
from tests.fake_provider import FakeProvider, new_job, text_frames
from tests.procs import GatewayProcess, free_port
from tests.telemetry.test_metrics import scrape

FIELDS = {
    "requestId", "createdAt", "settledAt", "apiKeyId", "requestedModel", "fallback", "attempts", "provider", "api",
    "model", "outcome", "stopReason", "errorMessage", "usage", "ttftMs", "durationMs", "upstreamFrames",
    "eventsSent", "lateFramesDropped", "clientDisconnected", "resumable", "resumed", "message", "door", "deployment",
    "cloud", "region", "droppedParams", "key", "team", "user", "tags", "session",
}  # fmt: skip


def record_of(gateway: Any, request_id: str, **kwargs: Any) -> dict[str, Any]:
    """The settled record of a request: wait for the turn to finish, then read it over HTTP."""
    gateway.job(request_id)
    response = gateway.http.get(f"/v1/requests/{request_id}", **kwargs)
    assert response.status_code == 200, response.text
    return response.json()


async def _raw_rows(url: str) -> str:
    """Every stored row of every ledger table, as text (what an operator with SELECT * would see)."""
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url[len("sqlite:///") :]) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return repr([db.execute(f"SELECT * FROM {t}").fetchall() for t in tables])
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        tables = [r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return repr([[tuple(r) for r in await conn.fetch(f"SELECT * FROM {t}")] for t in tables])
    finally:
        await conn.close()


def raw_rows(url: str) -> str:
    return run_async(_raw_rows(url))


async def _scalar(url: str, sql: str) -> Any:
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url[len("sqlite:///") :]) as db:
            return db.execute(sql).fetchone()[0]
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


# ---------------------------------------------------------------------------------------------- outcomes


def test_done_record(ledger_gateway):
    gw = ledger_gateway()
    m = marker()
    result = gw.stream(turn("anthropic/text", f"hello {m}"))
    request_id = result.headers["x-request-id"]
    record = record_of(gw, request_id)
    assert set(record) == FIELDS
    assert record["requestId"] == request_id == result.events[0]["requestId"]
    assert record["outcome"] == "done" and record["stopReason"] == "stop" and record["errorMessage"] is None
    assert (record["provider"], record["api"], record["model"]) == ("anthropic", "anthropic-messages", "text")
    assert record["requestedModel"] == "anthropic/text" and record["fallback"] == []
    assert record["door"] == "unified"
    assert record["apiKeyId"] is None  # authentication is off on this gateway
    assert record["message"] == result.message
    assert record["usage"] == result.terminal["usage"]
    assert record["eventsSent"] == len(result.events)
    assert record["upstreamFrames"] > 0 and record["lateFramesDropped"] == 0
    assert record["clientDisconnected"] is False
    assert isinstance(record["createdAt"], int) and isinstance(record["settledAt"], int)
    assert record["durationMs"] == record["settledAt"] - record["createdAt"] >= 0
    assert 0 <= record["ttftMs"] <= record["durationMs"]
    [attempt] = record["attempts"]
    assert attempt["outcome"] == "done" and attempt["model"] == "text"
    assert record["createdAt"] <= attempt["startedAt"] <= attempt["endedAt"] <= record["settledAt"]
    assert "httpStatus" not in attempt and "errorMessage" not in attempt


def test_fallback_record_lists_every_attempt(ledger_gateway):
    gw = ledger_gateway()
    result = gw.stream(turn("anthropic/http-500", fallback=["anthropic/text"]))
    start = result.events[0]
    assert start["model"] == "text"
    record = record_of(gw, result.headers["x-request-id"])
    assert record["outcome"] == "done"
    assert record["fallback"] == ["anthropic/text"] and record["requestedModel"] == "anthropic/http-500"
    assert (record["provider"], record["model"]) == ("anthropic", "text")
    attempts = record["attempts"]
    assert len(attempts) >= 3  # http-500 tried twice (retries=1), then the fallback
    failed, served = attempts[:-1], attempts[-1]
    for attempt in failed:
        assert attempt["model"] == "http-500" and attempt["outcome"] == "error" and attempt["httpStatus"] == 500
        assert "simulated internal error" in attempt["errorMessage"]
    assert served["model"] == "text" and served["outcome"] == "done"
    starts = [a["startedAt"] for a in attempts]
    assert starts == sorted(starts)


def test_error_record(ledger_gateway):
    gw = ledger_gateway()
    result = gw.stream(turn("anthropic/http-500"))
    record = record_of(gw, result.headers["x-request-id"])
    assert record["outcome"] == "error" and record["stopReason"] == "error"
    assert record["errorMessage"] == result.terminal["errorMessage"]
    assert "anthropic/http-500" in record["errorMessage"]
    assert [a["httpStatus"] for a in record["attempts"]] == [500, 500]
    assert record["ttftMs"] is None


def test_error_mid_stream_keeps_partial_content(ledger_gateway):
    gw = ledger_gateway()
    result = gw.stream(turn("anthropic/error-mid-stream", "say something"))
    record = record_of(gw, result.headers["x-request-id"])
    assert record["outcome"] == "error"
    assert record["message"]["content"] == result.message["content"]
    assert record["message"]["content"][0]["text"].startswith("Hello")
    assert record["ttftMs"] is not None


def test_client_disconnect_records_aborted_with_partial_content(ledger_gateway):
    gw = ledger_gateway()
    m = marker()
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=turn("anthropic/slow;n=1000;delay_ms=20", m)) as response:
            request_id = response.headers["x-request-id"]
            for line in response.iter_lines():
                if line.startswith("event: text_delta"):
                    break
    gw.sim.wait(m, until="closed")
    record = record_of(gw, request_id)
    assert record["outcome"] == "aborted" and record["stopReason"] == "aborted"
    assert record["clientDisconnected"] is True
    assert "client disconnected" in record["errorMessage"]
    text = record["message"]["content"][0]["text"]
    assert text.startswith("0000000 ") and 0 < len(text) < 1000 * 8
    assert record["attempts"][-1]["outcome"] == "aborted"


def test_retention_off_stores_no_content(ledger_gateway, ledger_url):
    gw = ledger_gateway(retain_content=False)
    m = marker()
    result = gw.stream(turn("anthropic/text", f"secret prompt {m}"))
    record = record_of(gw, result.headers["x-request-id"])
    assert record["outcome"] == "done" and "message" not in record
    assert set(record) == FIELDS - {"message"}
    assert record["usage"] == result.terminal["usage"]
    rows = raw_rows(ledger_url)
    assert result.headers["x-request-id"] in rows
    assert m not in rows and "Hello from the simulator" not in rows


# ---------------------------------------------------------------------------------------------- load


async def test_records_for_100_concurrent_streams(ledger_gateway):
    gw = ledger_gateway()

    async def one(client: httpx.AsyncClient, i: int) -> tuple[str, str]:
        async with client.stream("POST", "/v1/stream", json=turn("anthropic/text", f"n{i} {marker()}")) as response:
            assert response.status_code == 200
            body = "".join([chunk async for chunk in response.aiter_text()])
            return response.headers["x-request-id"], body

    async with httpx.AsyncClient(base_url=gw.url, timeout=60, limits=httpx.Limits(max_connections=100)) as client:
        results = await asyncio.gather(*(one(client, i) for i in range(100)))
    ids = {request_id for request_id, _ in results}
    assert len(ids) == 100
    assert all("event: done" in body for _, body in results)
    for request_id in ids:
        gw.job(request_id)
    listed = gw.http.get("/v1/requests", params={"limit": 200}).json()["records"]
    assert {r["requestId"] for r in listed} == ids
    assert all(r["outcome"] == "done" and r["settledAt"] is not None for r in listed)
    assert all(r["message"]["content"][0]["text"].startswith("Hello") for r in listed)


# ---------------------------------------------------------------------------------------------- crash recovery


def test_record_left_open_by_a_crash_is_interrupted_at_next_start(sim, ledger_url, tmp_path):
    log = tmp_path / "gateway.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    m = marker()
    with log.open("ab") as stderr:
        first = GatewayProcess(sim.url, port=port, database_url=ledger_url, stderr=stderr)
        try:
            first.wait_ready()
            with httpx.Client(base_url=url, timeout=30) as client:
                response = client.send(
                    client.build_request("POST", "/v1/stream", json=turn("anthropic/slow;n=1000;delay_ms=20", m)),
                    stream=True,
                )
                request_id = response.headers["x-request-id"]
                lines = response.iter_lines()
                assert any(line.startswith("event: text_delta") for line in lines)
                open_record = client.get(f"/v1/requests/{request_id}").json()
                assert open_record["outcome"] is None and open_record["settledAt"] is None
                assert open_record["requestedModel"] == "anthropic/slow;n=1000;delay_ms=20"
                first.stop()  # SIGKILL: no shutdown, no flush
                response.close()
        finally:
            first.stop()
        sim.wait(m, until="closed")

        second = GatewayProcess(sim.url, port=port, database_url=ledger_url, stderr=stderr)
        try:
            second.wait_ready()
            record = httpx.get(f"{url}/v1/requests/{request_id}", timeout=10).json()
        finally:
            second.proc.terminate()
            second.proc.wait(30)
    assert record["outcome"] == "interrupted"
    assert record["settledAt"] >= record["createdAt"]
    assert record["errorMessage"] == INTERRUPTED_MESSAGE
    assert record["requestId"] == request_id


def _open_slow_turn(client: httpx.Client, m: str) -> tuple[httpx.Response, Iterator[str], str]:
    """Start a long stream and read up to its first text delta: its record is open. Keep the line iterator
    alive while the stream should stay open (closing it closes the response)."""
    response = client.send(
        client.build_request("POST", "/v1/stream", json=turn("anthropic/slow;n=10000;delay_ms=20", m)), stream=True
    )
    request_id = response.headers["x-request-id"]
    lines = response.iter_lines()
    assert any(line.startswith("event: text_delta") for line in lines)
    return response, lines, request_id


def _stored_outcome(url: str, request_id: str) -> Any:
    return run_async(
        _scalar(url, f"SELECT COALESCE(outcome, 'open') FROM gateway_requests WHERE request_id = '{request_id}'")
    )


def test_second_process_on_the_same_store_spares_the_first_ones_live_turns(sim, ledger_url, tmp_path):
    """A second `make run` (or a second worker) on the same store must not mark the first one's turns."""
    m = marker()
    with (tmp_path / "gateway.log").open("ab") as stderr:
        first = GatewayProcess(sim.url, database_url=ledger_url, stderr=stderr)
        second = None
        try:
            first.wait_ready()
            with httpx.Client(base_url=first.url, timeout=30) as client:
                response, lines, request_id = _open_slow_turn(client, m)
                second = GatewayProcess(sim.url, database_url=ledger_url, stderr=stderr)
                second.wait_ready()
                assert httpx.get(f"{second.url}/v1/requests/{request_id}", timeout=10).json()["outcome"] is None
                assert _stored_outcome(ledger_url, request_id) == "open"
                assert next(lines) is not None  # the stream still runs
                response.close()
            assert record_of_process(first.url, request_id)["outcome"] == "aborted"
        finally:
            for proc in (first, second):
                if proc is not None:
                    proc.proc.terminate()
                    proc.proc.wait(30)


def record_of_process(url: str, request_id: str, timeout: float = 30) -> dict[str, Any]:
    """The record of a request once it settled, read over HTTP from a gateway process."""
    deadline = time.monotonic() + timeout
    while True:
        record = httpx.get(f"{url}/v1/requests/{request_id}", timeout=10).json()
        if record.get("outcome") is not None or time.monotonic() > deadline:
            return record
        time.sleep(0.05)  # polling another process's store, not synchronising the test


def test_a_process_that_cannot_listen_marks_nothing(sim, ledger_url, tmp_path):
    """A gateway that fails with "address already in use" must not have marked a dead one's records."""
    m = marker()
    with (tmp_path / "gateway.log").open("ab") as stderr:
        crashed = GatewayProcess(sim.url, database_url=ledger_url, stderr=stderr)
        try:
            crashed.wait_ready()
            with httpx.Client(base_url=crashed.url, timeout=30) as client:
                response, lines, request_id = _open_slow_turn(client, m)
                crashed.stop()  # SIGKILL: its record stays open, its process is gone
                response.close()
        finally:
            crashed.stop()
        sim.wait(m, until="closed")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            late = GatewayProcess(sim.url, port=taken.getsockname()[1], database_url=ledger_url)
            assert late.proc.wait(180) != 0
            assert (
                b"is already in use" in late.proc.stderr.read()
            )  # `start-up failed: GATEWAY_PORT … is already in use …`
    assert _stored_outcome(ledger_url, request_id) == "open"


# ---------------------------------------------------------------------------------------------- the stores


def _record(request_id: str, key: str | None = "alice", created: int = 1_000, outcome: str | None = None) -> dict:
    return {
        "requestId": request_id, "createdAt": created, "settledAt": created + 5 if outcome else None,
        "apiKeyId": key, "requestedModel": "anthropic/text", "fallback": [], "attempts": [], "provider": None,
        "api": None, "model": None, "outcome": outcome, "stopReason": None, "errorMessage": None, "usage": None,
        "ttftMs": None, "durationMs": None, "upstreamFrames": 0, "eventsSent": 0, "lateFramesDropped": 0,
        "clientDisconnected": False,
    }  # fmt: skip


async def test_store_scoping_order_and_upsert(ledger_url):
    ledger = open_ledger(ledger_url)
    await ledger.start()
    try:
        await ledger.write([("insert", _record("req_a", created=1)), ("insert", _record("req_b", "bob", created=2))])
        await ledger.write(
            [("insert", _record("req_c", created=3)), ("complete", _record("req_c", created=3, outcome="done"))]
        )
        await ledger.complete(_record("req_a", created=1, outcome="error"))
        await ledger.insert(_record("req_a", created=1))  # a late insert never reopens a settled record
        assert [r["requestId"] for r in await ledger.list("alice", 10)] == ["req_c", "req_a"]
        assert [r["requestId"] for r in await ledger.list(None, 10)] == ["req_c", "req_b", "req_a"]
        assert [r["requestId"] for r in await ledger.list(None, 1)] == ["req_c"]
        assert (await ledger.get("req_a", "alice"))["outcome"] == "error"
        assert await ledger.get("req_b", "alice") is None
        assert (await ledger.get("req_b", None))["apiKeyId"] == "bob"
        assert (await ledger.get("req_b", "bob"))["outcome"] is None
        await ledger.ping()
    finally:
        await ledger.aclose()


async def test_writes_gather_for_the_batch_delay_and_a_read_cuts_it_short(ledger_url):
    """Writes queued while the writer waits out `batch_delay` go in one batch; `flush()` (a records read,
    shutdown) and a full batch end the wait at once (the delay here is an hour)."""
    ledger = open_ledger(ledger_url)
    batches: list[list[str]] = []
    written = asyncio.Event()
    store_write = ledger.write

    async def write(items):
        await store_write(items)
        batches.append([row.request_id for _, row in items])
        written.set()

    ledger.write = write
    recorder = LedgerObserver(ledger, batch_delay=3600, batch_max=4)
    await recorder.start()

    def queue(request_id: str) -> None:
        assert recorder._admit("insert", encode_record(_record(request_id), ledger.instance_id))

    try:
        queue("req_1")
        for _ in range(20):  # let the writer wake and start its wait (it must not write yet)
            await asyncio.sleep(0)
        queue("req_2")
        assert await recorder.flush(timeout=30)
        assert batches == [["req_1", "req_2"]]
        assert (await ledger.get("req_2", "alice"))["requestId"] == "req_2"

        written.clear()
        for n in range(3, 7):  # the fourth fills a batch: written without a flush
            queue(f"req_{n}")
        await asyncio.wait_for(written.wait(), 30)
        assert batches[1] == ["req_3", "req_4", "req_5", "req_6"]
    finally:
        await recorder.aclose()


async def test_the_completion_of_a_record_written_open_is_queued_past_a_full_queue(ledger_url):
    """A turn's insert is in the batch being written (the store hangs) and the queue fills up behind it: the
    turn's completion is still queued (without the message, past the bound), so no drop leaves its record
    open once the store is back. Writes of turns whose insert was not written are dropped as before."""
    ledger = open_ledger(ledger_url)
    store_back = asyncio.Event()
    store_write = ledger.write

    async def write(items):
        await store_back.wait()
        await store_write(items)

    ledger.write = write
    job = new_job(FakeProvider(scripts=[text_frames("hello")]), model="text")
    job.turn.request_id = f"req_{marker()}"
    job.turn.close_reader()
    row = encode_record(_record("req_filler"), ledger.instance_id)
    recorder = LedgerObserver(ledger, batch_delay=0, queue_bytes=3 * pending_size(row))
    await recorder.start()
    try:
        recorder.turn_started(job)
        while recorder.pending:  # the writer takes the insert into its batch and waits for the store
            await asyncio.sleep(0)
        n = 0
        while recorder._admit("insert", encode_record(_record(f"req_filler_{n}"), ledger.instance_id)):
            n += 1
        await Dispatcher({}, Catalog(), Settings()).run(job)  # the turn settles
        assert job.settled is not None
        recorder.turn_finished(job, job.settled)

        assert [(w.kind, w.row.request_id) for w in recorder.pending][-1] == ("complete", job.turn.request_id)
        assert recorder.queued_bytes > recorder.queue_bytes  # past the bound, by this one row
        assert recorder.dropped == 1  # its message: the row is queued without it

        store_back.set()
        assert await recorder.flush(timeout=30)
        record = await ledger.get(job.turn.request_id, None)
        assert record["outcome"] == "done" and "message" not in record
    finally:
        store_back.set()
        await recorder.aclose()


async def test_a_read_that_waits_for_a_queued_insert_waits_for_the_completion_that_replaces_it(ledger_url):
    """A client reads its record as soon as the terminal event arrives (the console does): the turn's insert is
    still queued (the batch delay) and the turn finishes only after its late-frame grace, when the completion
    replaces the insert. The read's flush must wait for the completion in the insert's place; it returned when
    the insert left the queue, and the read found no record (a 404)."""
    ledger = open_ledger(ledger_url)
    recorder = LedgerObserver(ledger, batch_delay=0)  # its writer starts below: until then nothing is written
    job = new_job(FakeProvider(scripts=[text_frames("hello")]), model="text")
    job.turn.request_id = f"req_{marker()}"
    job.turn.close_reader()
    await Dispatcher({}, Catalog(), Settings()).run(job)  # the turn settles (this dispatcher has no observers)
    recorder.turn_started(job)
    read = asyncio.create_task(recorder.flush(timeout=30))
    for _ in range(20):  # the read starts waiting for the insert
        await asyncio.sleep(0)
    assert job.settled is not None
    recorder.turn_finished(job, job.settled)
    for _ in range(20):  # a read released by the insert's removal would finish here
        await asyncio.sleep(0)
    assert not read.done()
    assert [w.kind for w in recorder.pending] == ["complete"]

    await recorder.start()
    try:
        assert await read
        assert (await ledger.get(job.turn.request_id, None))["outcome"] == "done"
    finally:
        await recorder.aclose()


async def test_migration_is_safe_when_replicas_start_together(ledger_url):
    ledgers = [open_ledger(ledger_url) for _ in range(4)]
    try:
        await asyncio.gather(*(ledger.start() for ledger in ledgers))
        await ledgers[0].insert(_record("req_x"))
        assert (await ledgers[3].get("req_x", "alice"))["requestId"] == "req_x"
    finally:
        for ledger in ledgers:
            await ledger.aclose()
    expected = (postgres if ledger_url.startswith("postgresql") else sqlite).SCHEMA_VERSION
    assert await _scalar(ledger_url, "SELECT COUNT(*) FROM gateway_schema_version") == expected


async def _execute(url: str, statements: list[str]) -> None:
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url[len("sqlite:///") :]) as db:
            for statement in statements:
                db.execute(statement)
        return
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def test_a_version_1_store_gains_the_door_column(ledger_url):
    """A store written before doors were recorded migrates: old records read `door: null`, new ones their door."""
    store = postgres if ledger_url.startswith("postgresql") else sqlite
    old = orjson.dumps(_record("req_old", outcome="done")).decode()
    await _execute(
        ledger_url,
        [
            *store.MIGRATIONS[1],
            "CREATE TABLE gateway_schema_version (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL DEFAULT 0)",
            "INSERT INTO gateway_schema_version (version, applied_at) VALUES (1, 0)",
            "INSERT INTO gateway_requests (request_id, api_key_id, instance_id, created_at, settled_at, outcome, record) "
            f"VALUES ('req_old', 'alice', 'gone-1', 1000, 1005, 'done', '{old}')",
        ],
    )
    ledger = open_ledger(ledger_url)
    await ledger.start()
    try:
        await ledger.complete({**_record("req_new", created=2000, outcome="done"), "door": "openai-chat"})
        assert (await ledger.get("req_old", "alice"))["door"] is None
        assert (await ledger.get("req_new", "alice"))["door"] == "openai-chat"
    finally:
        await ledger.aclose()
    assert await _scalar(ledger_url, "SELECT door FROM gateway_requests WHERE request_id = 'req_new'") == "openai-chat"
    assert await _scalar(ledger_url, "SELECT MAX(version) FROM gateway_schema_version") == store.SCHEMA_VERSION


async def test_sqlite_recovery_marks_the_open_records_of_a_closed_process(tmp_path):
    url = f"sqlite:///{tmp_path}/nested/dir/ledger.db"
    first = open_ledger(url)
    await first.start()
    await first.insert(_record("req_open"))
    await first.complete(_record("req_done", outcome="done"))
    await first.aclose()
    second = open_ledger(url)
    await second.start()
    assert (await second.get("req_open", "alice"))["outcome"] is None  # start itself marks nothing
    assert await second.recover() == 1
    try:
        assert (await second.get("req_open", "alice"))["outcome"] == "interrupted"
        assert (await second.get("req_done", "alice"))["outcome"] == "done"
    finally:
        await second.aclose()


async def test_recovery_spares_live_instances_and_marks_dead_ones(ledger_url):
    """The liveness rule (app/ledger/liveness.py) on both stores."""
    # Long heartbeats: only the newcomer's recovery may mark anything during this test.
    live, stalled, crashed, closed = (open_ledger(ledger_url, _settings(heartbeat=3600)) for _ in range(4))
    for ledger in (live, stalled, crashed, closed):
        await ledger.start()
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    await live.insert(_record("req_live"))
    await stalled.insert(_record("req_stalled"))
    await crashed.insert(_record("req_crashed"))
    await closed.insert(_record("req_closed"))
    # `stalled` stopped heartbeating long ago; `crashed` ran on this host as a process that has exited.
    if ledger_url.startswith("sqlite"):
        await _execute(
            ledger_url,
            [
                f"UPDATE gateway_instances SET heartbeat_at = heartbeat_at - 3600000 WHERE instance_id = '{stalled.instance_id}'"
            ],
        )
    else:
        await _execute(
            ledger_url,
            [
                f"UPDATE gateway_instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = '{stalled.instance_id}'"
            ],
        )
    await _execute(
        ledger_url,
        [f"UPDATE gateway_instances SET pid = {int(dead_pid.stdout)} WHERE instance_id = '{crashed.instance_id}'"],
    )
    await closed.aclose()  # a clean stop removes its heartbeat row
    newcomer = open_ledger(ledger_url, _settings(heartbeat=3600))
    try:
        await newcomer.start()
        assert await newcomer.recover() == 3
        outcomes = {
            rid: (await newcomer.get(rid, None))["outcome"]
            for rid in ("req_live", "req_stalled", "req_crashed", "req_closed")
        }
        assert outcomes == {
            "req_live": None,
            "req_stalled": "interrupted",
            "req_crashed": "interrupted",
            "req_closed": "interrupted",
        }
        instances = await _scalar(ledger_url, "SELECT COUNT(*) FROM gateway_instances")
        assert instances == 2  # live and newcomer
        # The stalled replica recovers: its completion wins over the mark.
        await stalled.complete(_record("req_stalled", outcome="done"))
        assert (await newcomer.get("req_stalled", None))["outcome"] == "done"
    finally:
        for ledger in (newcomer, live, stalled, crashed):
            await ledger.aclose()


def _settings(heartbeat: float) -> Any:
    return Settings(ledger_heartbeat_s=heartbeat)


def test_unsupported_database_url_is_refused_without_echoing_it():
    with pytest.raises(ValueError) as info:
        open_ledger("mysql://user:hunter2@db/gw")
    assert "hunter2" not in str(info.value)


def test_readyz_is_503_when_the_store_is_unreachable(ledger_gateway):
    gw = ledger_gateway()
    assert gw.http.get("/readyz").status_code == 200
    gw.server.call(gw.state.ledger.aclose())
    response = gw.http.get("/readyz")
    assert response.status_code == 503 and response.json() == {"status": "store unavailable"}


# ---------------------------------------------------------------------------------------------- the write queue


@contextlib.contextmanager
def store_outage(url: str) -> Iterator[None]:
    """The store refuses writes while the block runs: another session holds the write lock (SQLite: an
    exclusive transaction, so the gateway's writes fail after its busy timeout and are retried; PostgreSQL: an
    exclusive table lock, so they wait). Reads still work. On exit the lock is released."""
    locked, release = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def hold_postgres() -> None:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                await conn.execute("LOCK TABLE gateway_requests IN EXCLUSIVE MODE")
                locked.set()
                await asyncio.to_thread(release.wait)
        finally:
            await conn.close()

    def hold() -> None:
        try:
            if url.startswith("sqlite"):
                db = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
                db.execute("BEGIN EXCLUSIVE")
                locked.set()
                release.wait()
                db.execute("ROLLBACK")
                db.close()
            else:
                asyncio.run(hold_postgres())
        except BaseException as exc:
            failure.append(exc)
            locked.set()

    thread = threading.Thread(target=hold, name="store-outage")
    thread.start()
    locked.wait(30)
    try:
        assert not failure, failure
        yield
    finally:
        release.set()
        thread.join(30)


def reachable_bytes(root: Any) -> int:
    """Memory of everything reachable from `root` (what holding `root` keeps alive), modules and classes aside."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def _dropped(gw: Any) -> float:
    samples = scrape(gw.url)
    return sum(v for (name, _), v in samples.items() if name == "gateway_ledger_writes_dropped_total")


def test_queue_holds_records_not_request_contexts(ledger_gateway, ledger_url):
    """During a store outage, queued writes keep only what the records need, not the turns' 1 MB contexts."""
    bound = 256 * 1024
    gw = ledger_gateway(ledger_queue_bytes=bound)
    recorder = gw.state.recorder
    ids = []
    with store_outage(ledger_url):
        for _ in range(4):
            result = gw.stream(turn("anthropic/text", marker() + " " + "x" * 1_000_000))
            assert result.terminal["type"] == "done"
            ids.append(result.headers["x-request-id"])
            gw.job(ids[-1])
        assert recorder.queued_bytes <= bound
        held = reachable_bytes(recorder.pending)
        assert held <= bound, f"the queue keeps {held} bytes alive"
        assert _dropped(gw) == 0  # small records: all of them fit
    assert gw.server.call(recorder.flush(30), timeout=40)
    for request_id in ids:
        assert record_of(gw, request_id)["outcome"] == "done"


def test_queue_is_bounded_by_bytes_and_drops_are_counted(ledger_gateway, ledger_url, caplog):
    """A store outage longer than the queue holds: what does not fit is dropped, counted and logged; what is
    written is never left open by a dropped completion; nothing waits for the store."""
    bound = 12 * 1024
    gw = ledger_gateway(ledger_queue_bytes=bound)
    recorder = gw.state.recorder
    ids = []
    with caplog.at_level(logging.WARNING, logger="gateway.ledger"), store_outage(ledger_url):
        for _ in range(30):
            result = gw.stream(turn("anthropic/text", marker() + " " + "y" * 300))
            assert result.terminal["type"] == "done"
            ids.append(result.headers["x-request-id"])
            gw.job(ids[-1])
            # Past the bound only by the message-less completion of a record written open (one turn at a time).
            assert recorder.queued_bytes <= bound + 2048
        dropped = _dropped(gw)
        assert dropped > 0
        assert recorder.dropped == dropped
        assert any("ledger queue full" in r.getMessage() for r in caplog.records)
    assert gw.server.call(recorder.flush(30), timeout=40)
    found = {}
    for request_id in ids:
        response = gw.http.get(f"/v1/requests/{request_id}")
        assert response.status_code in (200, 404)
        if response.status_code == 200:
            found[request_id] = response.json()
    assert 0 < len(found) < len(ids)
    assert all(record["outcome"] == "done" for record in found.values())  # none left open
