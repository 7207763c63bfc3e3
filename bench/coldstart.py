"""`python -m bench coldstart` (or `python -m bench.coldstart [--rounds N] [--base REV]`): process start to the first streamed turn done (issue 42 item 1).

Each round starts a fresh gateway process (the bench's environment: the three built-in vendors served, all on
the running simulator) and, as the direct path's yardstick from the same run, a fresh simulator process; from
just before `Popen` the load generator tries a short turn every 5 ms until one completes (connection refused
until the server listens). Reported per path, medians over rounds: the time to the first turn done, that turn's
time to first delta against the median of the next turns' (what a first turn pays for what start-up left to it),
and the resident memory once idle (after the warm turns and a pause, the adapters' warm-up done).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any

import uvloop

from bench import procs
from bench.client import Path, Target, stream
from bench.tracing import checkout

SCENARIO = "slow;n=5;delay_ms=0;size=8"  # a short turn
WARM_TURNS = 5
IDLE_PAUSE_S = 3.0  # after the warm turns: the background warm-up of the other adapters ends within it


async def _first_turn(target: Target, server: procs.Server, started: float) -> tuple[float, float]:
    """(seconds from `started` to the first completed turn, that turn's time to first delta in seconds)."""
    while True:
        result = await stream(target, SCENARIO, "cold-start")
        if result.completed and result.ttft is not None:
            return time.monotonic() - started, result.ttft
        assert server.popen is not None
        if server.popen.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.stderr()[-2000:]}")
        if time.monotonic() - started > 120:
            raise RuntimeError(f"{server.name}: no turn completed within 120 s ({result.error})")
        await asyncio.sleep(0.005)


async def _one(path: Path, sim: procs.Server, **env: str) -> dict[str, float]:
    """One fresh process of the path's server, from its start to its idle memory. `env`: the gateway's extra
    environment (`PYTHONPATH` of an older `app/`, for `--base`)."""
    if path is Path.GATEWAY:
        server = procs.Server("gateway-cold", "app.main:app", env=procs.gateway_env(sim, **env))
    else:
        server = procs.Server("simulator-cold", "simulator.app:app")
    cmd, port, env = server.uvicorn_command()
    started = time.monotonic()
    server.spawn(cmd, port, env)
    try:
        target = Target(path, port)
        first_s, first_ttft = await _first_turn(target, server, started)
        warm = [await stream(target, SCENARIO, f"warm-{i}") for i in range(WARM_TURNS)]
        warm_ttft = statistics.median(r.ttft for r in warm if r.ttft is not None)
        await asyncio.sleep(IDLE_PAUSE_S)
        return {
            "firstTurnS": round(first_s, 3),
            "firstTtftMs": round(first_ttft * 1000, 2),
            "warmTtftMs": round(warm_ttft * 1000, 2),
            "firstTurnExtraTtftMs": round((first_ttft - warm_ttft) * 1000, 2),
            "idleRssMiB": round(server.rss() / 2**20, 1),
        }
    finally:
        await asyncio.to_thread(server.stop)


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 3)


async def cold_start(sim: procs.Server, rounds: int, base: str | None = None) -> dict[str, Any]:
    """Both paths (and with `base`, the gateway's `app/` as of that git revision), interleaved round by round
    in an order that turns each round."""
    names = ["direct", "gateway"] + (["base"] if base else [])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    base_path = checkout(base, tempfile.mkdtemp(prefix="bench-base-")) if base else ""
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            path = Path.DIRECT if name == "direct" else Path.GATEWAY
            extra = {"PYTHONPATH": base_path} if name == "base" else {}
            runs[name].append(await _one(path, sim, **extra))
    keys = ("firstTurnS", "firstTtftMs", "warmTtftMs", "firstTurnExtraTtftMs", "idleRssMiB")
    summary = {name: {key: _median(entries, key) for key in keys} for name, entries in runs.items()}
    gateway, direct = summary["gateway"], summary["direct"]
    result: dict[str, Any] = {
        "scenario": SCENARIO,
        "rounds": rounds,
        **summary,
        "firstTurnS": gateway["firstTurnS"],
        "ratioToBare": round(gateway["firstTurnS"] / direct["firstTurnS"], 3),
        "firstTurnExtraTtftMs": gateway["firstTurnExtraTtftMs"],
        "idleRssMiB": gateway["idleRssMiB"],
        "perRound": runs,
    }
    if base:
        result["baseRevision"] = base
        result["baseRatioToBare"] = round(summary["base"]["firstTurnS"] / direct["firstTurnS"], 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", help="also start the gateway's app/ as of this git revision (e.g. main)")
    args = parser.parse_args()

    async def run() -> dict[str, Any]:
        sim = await asyncio.to_thread(procs.simulator)
        try:
            return await cold_start(sim, args.rounds, args.base)
        finally:
            sim.stop()

    result = uvloop.run(run())
    print(json.dumps({k: v for k, v in result.items() if k != "perRound"}, indent=1))


if __name__ == "__main__":
    main()
