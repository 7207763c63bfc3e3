"""Client-side faults: disconnects at random points, a client that never reads."""

from __future__ import annotations

import asyncio
import random
import time

import httpx

from tests.conftest import marker, turn


async def _count_tasks() -> int:
    return len([t for t in asyncio.all_tasks() if not t.done()])


def test_disconnects_at_random_points_of_200_streams(gateway):
    rng = random.Random(20261202)
    gateway.stream(turn("anthropic/text"))  # warm-up: starts the SSE library's one per-loop watcher task
    baseline = gateway.server.call(_count_tasks())
    plans = [(marker(), rng.randint(0, 40)) for _ in range(200)]

    async def one(client: httpx.AsyncClient, m: str, frames_to_read: int) -> tuple[str, int]:
        body = turn("anthropic/slow;n=60;delay_ms=5", m, options={"throttleMs": 0})
        async with client.stream("POST", "/v1/stream", json=body) as response:
            request_id = response.headers["x-request-id"]
            read = 0
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    read += 1
                    if read >= frames_to_read:
                        break
        return request_id, read

    async def main():
        limits = httpx.Limits(max_connections=25)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30, limits=limits) as client:
            return await asyncio.gather(*(one(client, m, k) for m, k in plans))

    results = asyncio.run(main())
    outcomes = {}
    upstreams_cut = 0
    for (m, _k), (request_id, _read) in zip(plans, results):
        job = gateway.job(request_id)
        assert job.turn.settled and job.turn.terminal is not None
        outcomes[job.turn.outcome] = outcomes.get(job.turn.outcome, 0) + 1
        if job.turn.outcome == "aborted":
            assert job.client_disconnected
            entry = gateway.sim.wait(m, until="finished")
            # Either the gateway closed the upstream mid-body, or the body had already been fully sent.
            assert entry["clientClosed"] or entry["completed"]
            upstreams_cut += entry["clientClosed"]
    assert outcomes.get("aborted", 0) > 150  # most disconnect long before the 60-delta stream ends
    assert upstreams_cut > 20  # how many were cut mid-body depends on scheduling; each one is checked above
    assert set(outcomes) <= {"aborted", "done"}
    deadline = time.monotonic() + 10
    while gateway.server.call(_count_tasks()) > baseline and time.monotonic() < deadline:
        time.sleep(0.05)  # bounded wait for uvicorn's connection tasks to wind down
    assert gateway.server.call(_count_tasks()) <= baseline
    assert not gateway.state.jobs


def test_a_client_that_never_reads_stops_the_upstream(gateway):
    m = marker()
    size = 256
    n = 200_000  # 51 MB: far more than any socket buffers between the three processes can hold
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        with client.stream(
            "POST", "/v1/stream", json=turn(f"anthropic/slow;n={n};delay_ms=0;size={size}", m)
        ) as response:
            request_id = response.headers["x-request-id"]
            previous, stable_since = -1, time.monotonic()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                seen = gateway.sim.seen(m)
                sent = seen[0]["framesSent"] if seen else 0
                if sent != previous:
                    previous, stable_since = sent, time.monotonic()
                elif time.monotonic() - stable_since > 1.0:
                    break
                time.sleep(0.1)
            entry = gateway.sim.seen(m)[0]
            assert not entry["completed"], "the gateway kept reading an upstream nobody reads"
            assert entry["framesSent"] < n // 2
            job = next(j for j in list(gateway.state.jobs) if j.turn.request_id == request_id)
            assert job.turn.queue.pending_bytes <= gateway.state.settings.max_pending_bytes + 4096
    assert gateway.sim.wait(m, until="closed")["clientClosed"] is True
    assert gateway.job(request_id).turn.outcome == "aborted"
