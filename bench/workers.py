"""`python -m bench workers` — one machine's short turns per second with `GATEWAY_WORKERS=1` and `=2`.

Measures the gateway's scaling rather than its neighbours': the upstream is `bench.canned` (a raw asyncio server
replaying one fixed Anthropic event stream, five text deltas) and the load is `bench.loadgen` (raw asyncio
connections posting the same short turn back to back, a new connection every `PER_CONNECTION` turns so the
kernel spreads them over the workers); both cost a few percent of a core. The gateway runs as operators run it,
`python -m app` with `GATEWAY_WORKERS=N`, a Redis of its own (N > 1 needs one; the turns here carry no key, so
nothing is counted there) and a SQLite ledger recording every turn.

One and two workers alternate (1, 2, 2, 1, …: the machine's load drifts) and each round reports: turns per
second, the gateway's CPU per turn and cores used (supervisor and workers, user + system), each worker's share,
the load generator's and upstream's cores, and the cores the rest of the machine took meanwhile (system-wide
busy time minus ours): the CPU the gateway could not have. The ratio is the median of the rounds' paired
ratios (two workers ÷ the one-worker round next to it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from statistics import median
from typing import Any

import psutil

from bench import procs

CONCURRENCY = 32
PER_CONNECTION = 20


def _system_busy() -> float:
    """Seconds every CPU of the machine spent busy so far."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _redis() -> tuple[str, subprocess.Popen | None]:
    """A redis-server of the bench's own, or `BENCH_REDIS_URL` when set."""
    if os.environ.get("BENCH_REDIS_URL"):
        return os.environ["BENCH_REDIS_URL"], None
    if shutil.which("redis-server") is None:
        raise RuntimeError("the workers scenario needs redis-server, or BENCH_REDIS_URL naming a Redis to use")
    port = procs.free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tempfile.mkdtemp(prefix="bench-redis-"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return f"redis://127.0.0.1:{port}/0", proc


def _gateway(canned: procs.Server, redis_url: str, workers: int) -> procs.Server:
    port = procs.free_port()
    workdir = tempfile.mkdtemp(prefix=f"bench-workers{workers}-")
    env = {
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_WORKERS": str(workers),
        "GATEWAY_REDIS_URL": redis_url,
        "GATEWAY_ANTHROPIC_BASE_URL": canned.url,
        "ANTHROPIC_API_KEY": "bench-key",
        "GATEWAY_API_KEYS": "",
        "GATEWAY_LOG_LEVEL": "warning",
        # `BENCH_DATABASE_URL`: a PostgreSQL ledger (emptied of nothing: records accumulate), else SQLite.
        "GATEWAY_DATABASE_URL": os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{workdir}/gateway.db",
    }
    server = procs.Server(f"gateway-{workers}w", "", env=env, health="/readyz", workers=workers, workdir=workdir)
    return server.start_command([sys.executable, "-m", "app"], port, env)


async def _round(gateway: procs.Server, servers: list[procs.Server], seconds: float) -> dict[str, Any]:
    """Run the load generator against `gateway`; the figures of its counting window."""
    loadgen = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.loadgen",
        gateway.url,
        "--concurrency",
        str(CONCURRENCY),
        "--per-connection",
        str(PER_CONNECTION),
        "--seconds",
        str(seconds),
        "--warmup",
        "2",
        cwd=procs.ROOT,
        env={**os.environ, "PYTHONPATH": str(procs.ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert loadgen.stdout is not None
    workers = [p for p in gateway.processes() if "spawn_main" in " ".join(p.cmdline())] if gateway.workers > 1 else []

    def sample() -> dict[str, Any]:
        return {
            "gateway": gateway.cpu(),
            "workers": [procs.cpu_seconds(p) for p in workers if p.is_running()],
            "servers": sum(server.cpu() for server in servers),
            "system": _system_busy(),
        }

    start = end = None
    last = b""
    while line := await loadgen.stdout.readline():
        if line.startswith(b"window start"):
            start = sample()
        elif line.startswith(b"window end"):
            end = sample()
        else:
            last = line
    await loadgen.wait()
    assert start is not None and end is not None, "the load generator did not report its window"
    result = json.loads(last)
    window, turns = result["seconds"], result["turns"]
    gateway_cpu = end["gateway"] - start["gateway"]
    servers_cpu = end["servers"] - start["servers"]
    per_worker = [b - a for a, b in zip(start["workers"], end["workers"])]
    others = end["system"] - start["system"] - gateway_cpu - servers_cpu - result["cpuS"]
    return {
        "turnsPerS": round(turns / window, 1),
        "failed": result["failed"],
        "gatewayCpuMsPerTurn": round(gateway_cpu * 1000 / turns, 3) if turns else None,
        "gatewayCores": round(gateway_cpu / window, 2),
        "turnsPerGatewayCoreS": round(turns / gateway_cpu, 1) if gateway_cpu else None,
        "workerCores": [round(cpu / window, 2) for cpu in per_worker],
        "loadgenCores": round(result["cpuS"] / window, 3),
        "upstreamAndRedisCores": round(servers_cpu / window, 3),
        "otherCores": round(max(0.0, others) / window, 2),
        "loadAverage1m": round(os.getloadavg()[0], 2),
    }


async def run(quick: bool) -> dict[str, Any]:
    rounds = 2 if quick else 4
    seconds = 6.0 if quick else 12.0
    redis_url, redis_proc = _redis()
    canned = procs.Server("canned", "", health="/")
    canned.start_command([sys.executable, "-m", "bench.canned", str(port := procs.free_port())], port, {})
    servers = [canned]
    per_round: list[dict[str, Any]] = []
    try:
        for index in range(rounds):
            order = (1, 2) if index % 2 == 0 else (2, 1)
            entry: dict[str, Any] = {}
            for workers in order:
                gateway = await asyncio.to_thread(_gateway, canned, redis_url, workers)
                try:
                    entry[str(workers)] = await _round(gateway, servers, seconds)
                finally:
                    await asyncio.to_thread(gateway.stop)
            per_round.append(entry)
            print(f"[bench] workers round {index + 1}/{rounds}: {entry}", file=sys.stderr, flush=True)
    finally:
        canned.stop()
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)

    def run_of(count: str) -> dict[str, Any]:
        entries = [entry[count] for entry in per_round]
        return {
            "workers": int(count),
            "turns": {
                "gatewayTurnsPerS": median(e["turnsPerS"] for e in entries),
                "gatewayCpuMsPerTurn": median(e["gatewayCpuMsPerTurn"] for e in entries if e["gatewayCpuMsPerTurn"]),
                "gatewayCores": median(e["gatewayCores"] for e in entries),
                "turnsPerGatewayCoreS": median(e["turnsPerGatewayCoreS"] for e in entries if e["turnsPerGatewayCoreS"]),
                "otherCores": median(e["otherCores"] for e in entries),
                "failedStreams": sum(e["failed"] for e in entries),
            },
        }

    paired = [entry["2"]["turnsPerS"] / entry["1"]["turnsPerS"] for entry in per_round if entry["1"]["turnsPerS"]]
    return {
        "scenario": "canned upstream (bench/canned.py, five text deltas), bench/loadgen.py "
        f"c={CONCURRENCY}, a new connection every {PER_CONNECTION} turns; python -m app, SQLite ledger, Redis",
        "rounds": per_round,
        "secondsPerRound": seconds,
        "runs": {count: run_of(count) for count in ("1", "2")},
        "turnsPerSRatio": round(median(paired), 2) if paired else None,
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run("--quick" in sys.argv)), indent=1))
