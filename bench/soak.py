"""Soak: N minutes of mixed traffic with injected upstream faults; every request must settle exactly once.

    python -m bench.soak --minutes 10 --fault-rate 0.2 --concurrency 24

Starts the vendor simulator and the gateway as two uvicorn subprocesses on free loopback ports (the gateway
with short first-event/idle timeouts, one retry, a fresh SQLite ledger in a temp dir), then runs
`--concurrency` clients that stream `/v1/stream` turns over all three providers and several scenarios. A
share `--fault-rate` of the turns carries a simulator fault (`simulator/faults.py`, any applicable fault ×
point); a small share of clients disconnect early. At the end it prints:

- requests, faults injected, client disconnects;
- terminal events seen by clients (must equal the requests that were read to the end; each stream is
  checked for exactly one terminal event, last) and outcomes;
- records: `GET /v1/requests/{id}` for every request, settled ones counted (must equal requests);
- the gateway's RSS and open file descriptors at start (after a warm-up) and at the end (after traffic
  stopped and the turns drained), from psutil.

Exit status 1 when a count does not match.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.faults import POINTS, applicable, APPLICABLE  # noqa: E402

PROVIDERS = ("anthropic", "openai", "google")
SCENARIOS = ("text", "tools", "thinking", "slow;n=40;delay_ms=5", "max-tokens")
TERMINALS = ("done", "error")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(app: str, port: int, env: dict[str, str], cwd: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    log = open(Path(cwd) / f"{app.partition('.')[0]}.log", "wb")  # warnings of faulted turns: noisy by design
    return subprocess.Popen(
        command, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, stdout=log, stderr=subprocess.STDOUT
    )


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not become healthy")


def process_figures(pid: int) -> tuple[float, int]:
    proc = psutil.Process(pid)
    return proc.memory_info().rss / 2**20, proc.num_fds()


FAULT_CASES = [(fault, point) for fault, points in APPLICABLE.items() for point in POINTS if point in points]


@dataclass
class Tally:
    requests: int = 0
    faults: int = 0
    disconnects: int = 0
    terminals: int = 0
    read_to_end: int = 0
    violations: list[str] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    ids: list[str] = field(default_factory=list)


def pick_model(rng: random.Random, fault_rate: float) -> tuple[str, bool]:
    provider = rng.choice(PROVIDERS)
    scenario = rng.choice(SCENARIOS)
    if rng.random() >= fault_rate:
        return f"{provider}/{scenario}", False
    while True:
        fault, point = rng.choice(FAULT_CASES)
        if applicable(provider, fault, point):
            break
    extra = ""
    if fault == "http":
        extra = ";" + rng.choice(["status=503", "status=429;retry_after=0", "status=400"])
    elif fault == "huge_delta":
        extra = ";mb=1"
    elif fault == "drip":
        extra = ";chunk=16"
    return f"{provider}/tools;fault={fault};at={point}{extra}", True


async def one(
    client: httpx.AsyncClient, rng: random.Random, tally: Tally, fault_rate: float, disconnect_rate: float
) -> None:
    model, faulted = pick_model(rng, fault_rate)
    leave_after = rng.randint(1, 6) if rng.random() < disconnect_rate else None
    body = {"model": model, "context": {"messages": [{"role": "user", "content": f"soak {rng.random()}"}]}}
    tally.requests += 1
    tally.faults += faulted
    try:
        async with client.stream("POST", "/v1/stream", json=body) as response:
            request_id = response.headers.get("x-request-id")
            if request_id:
                tally.ids.append(request_id)
            if response.status_code != 200:
                tally.violations.append(f"{model}: HTTP {response.status_code}")
                return
            events: list[dict] = []
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if leave_after is not None and len(events) >= leave_after and events[-1]["type"] not in TERMINALS:
                        tally.disconnects += 1
                        return
    except httpx.HTTPError as exc:
        tally.violations.append(f"{model}: {type(exc).__name__}: {exc}")
        return
    tally.read_to_end += 1
    terminals = [i for i, e in enumerate(events) if e["type"] in TERMINALS]
    if len(terminals) != 1 or terminals[0] != len(events) - 1:
        tally.violations.append(f"{model}: terminal events at {terminals} of {len(events)}")
    tally.terminals += len(terminals)
    if events:
        tally.outcomes[f"{events[-1]['type']}:{events[-1].get('reason')}"] += 1


async def traffic(
    url: str, seconds: float, concurrency: int, fault_rate: float, disconnect_rate: float, seed: int
) -> Tally:
    tally = Tally()
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency + 4)

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def worker(n: int) -> None:
            rng = random.Random(seed * 1000 + n)
            while time.monotonic() < deadline:
                await one(client, rng, tally, fault_rate, disconnect_rate)

        await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return tally


async def fetch_records(url: str, ids: list[str]) -> tuple[int | None, Counter]:
    """Settled records among `ids` (None when the gateway has no record API)."""
    settled, outcomes = 0, Counter[str]()
    sem = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        probe = await client.get(f"/v1/requests/{ids[0]}") if ids else None
        if (
            probe is None
            or probe.status_code not in (200, 404)
            or (probe.status_code == 404 and "not_found" not in probe.text)
        ):
            return None, outcomes

        async def get(request_id: str) -> None:
            nonlocal settled
            async with sem:
                response = await client.get(f"/v1/requests/{request_id}")
            if response.status_code == 200:
                record = response.json()
                if record.get("settledAt") is not None and record.get("outcome"):
                    settled += 1
                    outcomes[record["outcome"]] += 1

        await asyncio.gather(*(get(i) for i in ids))
    return settled, outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--disconnect-rate", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="gateway-soak-")
    sim_port, gw_port = free_port(), free_port()
    sim_url, gw_url = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{gw_port}"
    sim = start("simulator.app:app", sim_port, {}, workdir)
    gw_env = {
        "ANTHROPIC_API_KEY": "soak-anthropic",
        "OPENAI_API_KEY": "soak-openai",
        "GEMINI_API_KEY": "soak-google",
        "GATEWAY_ANTHROPIC_BASE_URL": f"{sim_url}/anthropic",
        "GATEWAY_OPENAI_BASE_URL": f"{sim_url}/openai/v1",
        "GATEWAY_GOOGLE_BASE_URL": f"{sim_url}/google",
        "GATEWAY_DATABASE_URL": f"sqlite:///{workdir}/soak.db",
        "GATEWAY_FIRST_EVENT_TIMEOUT": "1",
        "GATEWAY_IDLE_TIMEOUT": "1",
        "GATEWAY_RETRIES": "1",
        "GATEWAY_RETRY_BACKOFF_MS": "20",
        "GATEWAY_RETRY_AFTER_CAP_MS": "100",
        "GATEWAY_LATE_FRAME_GRACE": "0.5",
        "GATEWAY_LOG_LEVEL": "warning",
    }
    gw = start("app.main:app", gw_port, gw_env, workdir)
    try:
        wait_healthy(f"{sim_url}/_sim/requests?contains=none", sim)
        wait_healthy(f"{gw_url}/healthz", gw)
        asyncio.run(traffic(gw_url, 3, 4, 0.0, 0.0, seed=0))  # warm-up: imports, pools, the ledger
        rss0, fds0 = process_figures(gw.pid)
        started = time.monotonic()
        tally = asyncio.run(
            traffic(gw_url, args.minutes * 60, args.concurrency, args.fault_rate, args.disconnect_rate, args.seed)
        )
        elapsed = time.monotonic() - started
        time.sleep(3)  # let the last turns' late-frame grace and upstream closes finish before measuring
        rss1, fds1 = process_figures(gw.pid)
        settled, record_outcomes = asyncio.run(fetch_records(gw_url, tally.ids))
    finally:
        for proc in (gw, sim):
            proc.terminate()
        for proc in (gw, sim):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    ok = (
        not tally.violations
        and tally.terminals == tally.read_to_end
        and tally.read_to_end + tally.disconnects == tally.requests
    )
    print(
        f"soak: {elapsed:.0f} s, concurrency {args.concurrency}, fault rate {args.fault_rate}, disconnect rate {args.disconnect_rate}"
    )
    print(f"requests:            {tally.requests} ({tally.requests / elapsed:.1f}/s)")
    print(f"faults injected:     {tally.faults}")
    print(f"client disconnects:  {tally.disconnects}")
    print(f"terminal events:     {tally.terminals} (streams read to the end: {tally.read_to_end}; must be equal)")
    print(f"stream outcomes:     {dict(sorted(tally.outcomes.items()))}")
    if settled is None:
        print("records:             skipped (no GET /v1/requests/{id} on this gateway)")
    else:
        ok = ok and settled == tally.requests
        print(
            f"records:             {settled} settled of {tally.requests} requests (must be equal) {dict(sorted(record_outcomes.items()))}"
        )
    print(f"gateway RSS:         {rss0:.1f} MiB at start, {rss1:.1f} MiB at end")
    print(f"gateway open fds:    {fds0} at start, {fds1} at end")
    print(f"process logs:        {workdir}")
    for violation in tally.violations[:20]:
        print(f"VIOLATION: {violation}")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
