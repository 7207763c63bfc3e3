"""`python -m bench.limits [--quick]` — what Redis-backed per-key limits add to a turn, in the same run.

Two gateway processes on the same simulator, both with client key `bench` (sent as `x-api-key`, as every
bench request is):

- **off**: the key from `GATEWAY_API_KEYS` (no policy: no limit check at all);
- **on**: the key from a keys file with every limit set (rpm, tpm, concurrent streams, day and month budget,
  all far above what the run uses) and `GATEWAY_REDIS_URL` on a redis-server of the bench's own, so each turn
  runs the admission script (one round trip before the turn starts), takes and releases a concurrency lease
  and is charged its tokens and cost when it settles.

Rounds alternate the order (off then on, on then off). Each round runs a batch of paced streams
(`slow;n=16;delay_ms=5;size=8`) at concurrency 1 (sequential) and at concurrency 20, on each gateway. Reported
per concurrency: time to first text delta p50/p99 (on − off, median over rounds), gateway CPU per turn
(process CPU seconds over the batch ÷ turns, on and off) and the redis-server's CPU per turn. Results:
bench/results/limits.{json,md}. The machine is shared: compare on with off, not with other runs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path as FsPath
from statistics import median
from typing import Any

import psutil

from bench import procs
from bench.client import Path, Target, stream
from bench.stats import ms, pct

RESULTS = FsPath(__file__).parent / "results"
SCENARIO = "slow;n=16;delay_ms=5;size=8"
BENCH_KEY = "bench-key"  # what bench/client.py sends as x-api-key


def _keys_file(directory: str) -> str:
    path = FsPath(directory) / "keys.json"
    big = 10**9
    path.write_text(
        json.dumps(
            {
                "keys": [
                    {
                        "name": "bench",
                        "sha256": hashlib.sha256(BENCH_KEY.encode()).hexdigest(),
                        "requests_per_minute": big,
                        "tokens_per_minute": big,
                        "concurrent_streams": big,
                        "budget_usd_per_day": big,
                        "budget_usd_per_month": big,
                    }
                ]
            }
        )
    )
    return str(path)


def _redis_server(directory: str) -> tuple[subprocess.Popen, int]:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed")
    port = procs.free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=0.5).ping():
                return server, port
        except redis.RedisError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


async def _batch(
    gateway: procs.Server, redis_proc: psutil.Process, concurrency: int, per_worker: int
) -> dict[str, Any]:
    target = Target(Path.GATEWAY, gateway.port)
    results = []

    async def worker() -> None:
        for _ in range(per_worker):
            results.append(await stream(target, SCENARIO, f"bench-{uuid.uuid4().hex[:16]}"))

    cpu0, redis0 = gateway.cpu(), procs.cpu_seconds(redis_proc)
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    turns = len(results)
    failed = sum(1 for r in results if r.status != 200 or not r.completed)
    ttfts = [r.ttft for r in results if r.ttft is not None]
    return {
        "turns": turns,
        "failed": failed,
        "ttftP50Ms": ms(pct(ttfts, 50)),
        "ttftP99Ms": ms(pct(ttfts, 99)),
        "gatewayCpuMsPerTurn": round((gateway.cpu() - cpu0) * 1000 / turns, 3),
        "redisCpuMsPerTurn": round((procs.cpu_seconds(redis_proc) - redis0) * 1000 / turns, 3),
    }


async def run(quick: bool) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="bench-limits-")
    redis_server, redis_port = _redis_server(workdir)
    redis_proc = psutil.Process(redis_server.pid)
    sim = procs.simulator()
    off = on = None
    try:
        off = procs.gateway(sim, GATEWAY_API_KEYS=f"bench:{BENCH_KEY}")
        on = procs.gateway(
            sim, GATEWAY_KEYS_FILE=_keys_file(workdir), GATEWAY_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0"
        )
        gateways = {"off": off, "on": on}
        for gateway in gateways.values():  # warm up (imports, connection pools, the Lua scripts loaded)
            await _batch(gateway, redis_proc, 5, 4)
        rounds = 3 if quick else 6
        levels = {1: 20 if quick else 40, 20: 3 if quick else 5}  # concurrency → turns per worker
        out: dict[str, Any] = {"scenario": SCENARIO, "rounds": rounds, "loadavgStart": os.getloadavg(), "levels": {}}
        for concurrency, per_worker in levels.items():
            per_round = []
            for r in range(rounds):
                order = ("off", "on") if r % 2 == 0 else ("on", "off")
                entry = {}
                for name in order:
                    entry[name] = await _batch(gateways[name], redis_proc, concurrency, per_worker)
                per_round.append(entry)
            out["levels"][str(concurrency)] = {
                "rounds": per_round,
                "addedTtftP50Ms": round(median(e["on"]["ttftP50Ms"] - e["off"]["ttftP50Ms"] for e in per_round), 3),
                "addedTtftP99Ms": round(median(e["on"]["ttftP99Ms"] - e["off"]["ttftP99Ms"] for e in per_round), 3),
                "gatewayCpuMsPerTurnOff": round(median(e["off"]["gatewayCpuMsPerTurn"] for e in per_round), 3),
                "gatewayCpuMsPerTurnOn": round(median(e["on"]["gatewayCpuMsPerTurn"] for e in per_round), 3),
                "redisCpuMsPerTurn": round(median(e["on"]["redisCpuMsPerTurn"] for e in per_round), 3),
                "failed": sum(e[n]["failed"] for e in per_round for n in ("on", "off")),
            }
        import redis

        keys = redis.Redis(port=redis_port, decode_responses=True).keys("gw:*")
        out["redisKeysWritten"] = sorted({str(k).split(":")[1] for k in keys})  # the limits really ran
        out["loadavgEnd"] = os.getloadavg()
        return out
    finally:
        for server in (on, off, sim):
            if server is not None:
                server.stop()
        redis_server.terminate()
        redis_server.wait(10)


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Redis-backed per-key limits: on vs off (same run)",
        "",
        f"Scenario `{result['scenario']}`, {result['rounds']} rounds per level, order alternating. "
        f"Load average {result['loadavgStart']} → {result['loadavgEnd']}. Redis keys written by the run: "
        f"{', '.join(result['redisKeysWritten'])}.",
        "",
        "| concurrency | added TTFT p50 | added TTFT p99 | gateway CPU/turn off | on | redis-server CPU/turn | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for level, row in result["levels"].items():
        lines.append(
            f"| {level} | {row['addedTtftP50Ms']} ms | {row['addedTtftP99Ms']} ms | {row['gatewayCpuMsPerTurnOff']} ms | "
            f"{row['gatewayCpuMsPerTurnOn']} ms | {row['redisCpuMsPerTurn']} ms | {row['failed']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args.quick))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "limits.json").write_text(json.dumps(result, indent=2))
    (RESULTS / "limits.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
