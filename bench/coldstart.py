"""`python -m bench coldstart` (or `python -m bench.coldstart [--rounds N] [--base REV] [--bytecode] [--env K=V]`):
process start to the first streamed turn done (issue 42 item 1).

Each round starts fresh gateway processes (the bench's environment: the three built-in vendors served, all on the
running simulator) and, as the direct path's yardstick from the same run, a fresh simulator process. From just
before `Popen` the load generator asks the health route every 5 ms (connection refused until the server listens).
Each gateway variant starts twice per round:

- `healthz`: the first short turn is sent as soon as `/healthz` answers (the server listens; the background
  warm-up is importing the vendor SDKs): what a client that does not wait for readiness meets;
- `readyz`: the first turn is sent once `/readyz` answers 200 (the warm-up done): what a load balancer that
  follows readiness sends.

Reported per variant, medians over rounds: seconds to `/healthz` 200 and to `/readyz` 200, to the first turn done
in each mode, the process's CPU seconds (user + system) at each of those moments (what the start cost, whatever
the machine's load), that turn's time to first delta against the median of the next turns' (what a first turn pays for
what start-up left to it), the resident memory once idle (after the warm turns and a pause) and the CPU seconds
the process used until then. The keys of before (`firstTurnS`, `firstTtftMs`, …) are the `healthz` mode's.

`--bytecode`: every process started reads and writes compiled bytecode in a private cache directory
(`PYTHONPYCACHEPREFIX`), filled by one unrecorded round first, as the container image has its bytecode compiled
at build (Dockerfile); without it a checkout run with `PYTHONDONTWRITEBYTECODE=1` and a venv installed without
bytecode compiles every module it imports from source, at every start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
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
POLL_S = 0.005
TIMEOUT_S = 120.0
SIMULATOR_HEALTH = "/_sim/requests?contains=healthcheck"


async def _status(port: int, path: str) -> int | None:
    """The status of `GET path` on the loopback port, or None while nothing listens there."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n".encode())
        head = await reader.readline()
        return int(head.split()[1]) if head.startswith(b"HTTP/") else None
    except (OSError, IndexError, ValueError):
        return None
    finally:
        writer.close()


async def _until_ok(server: procs.Server, path: str, started: float) -> float:
    """Seconds from `started` until `GET path` answers 200 (asked every 5 ms)."""
    while True:
        if await _status(server.port, path) == 200:
            return time.monotonic() - started
        assert server.popen is not None
        if server.popen.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.stderr()[-2000:]}")
        if time.monotonic() - started > TIMEOUT_S:
            raise RuntimeError(f"{server.name}: {path} did not answer 200 within {TIMEOUT_S:.0f} s")
        await asyncio.sleep(POLL_S)


async def _one(path: Path, sim: procs.Server, mode: str, provider: str = "anthropic", **env: str) -> dict[str, float]:
    """One fresh process of the path's server, from its start to its idle memory; its first turn sent once
    `/healthz` (mode `healthz`) or `/readyz` (mode `readyz`) answers 200. `env`: the gateway's extra environment
    (`PYTHONPATH` of an older `app/`, for `--base`; `PYTHONPYCACHEPREFIX`, for `--bytecode`); `provider`: the one the
    gateway's turns name (`<provider>/<scenario>` on `/v1/stream`)."""
    if path is Path.GATEWAY:
        server = procs.Server("gateway-cold", "app.main:app", env=procs.gateway_env(sim, **env))
    else:
        server = procs.Server("simulator-cold", "simulator.app:app", env=env)
    cmd, port, spawn_env = server.uvicorn_command()
    if path is Path.GATEWAY:  # its own port, as `python -m app` has it (demo mode's simulator is served there)
        spawn_env["GATEWAY_PORT"] = str(port)
    started = time.monotonic()
    server.spawn(cmd, port, spawn_env)
    try:
        target = Target(path, port, provider=provider)
        healthz_s = await _until_ok(server, "/healthz" if path is Path.GATEWAY else SIMULATOR_HEALTH, started)
        healthz_cpu = readyz_cpu = server.cpu()
        readyz_s = healthz_s
        if mode == "readyz" and path is Path.GATEWAY:
            readyz_s = await _until_ok(server, "/readyz", started)
            readyz_cpu = server.cpu()
        first = await stream(target, SCENARIO, "cold-start")
        if not first.completed or first.ttft is None:
            raise RuntimeError(f"{server.name}: the first turn failed ({first.status}, {first.error})")
        first_s = time.monotonic() - started
        first_cpu = server.cpu()
        warm = [await stream(target, SCENARIO, f"warm-{i}") for i in range(WARM_TURNS)]
        warm_ttft = statistics.median(r.ttft for r in warm if r.ttft is not None)
        if mode == "healthz" and path is Path.GATEWAY:  # when the warm-up ended, for the record
            readyz_s = await _until_ok(server, "/readyz", started)
            readyz_cpu = server.cpu()
        await asyncio.sleep(IDLE_PAUSE_S)
        return {
            "healthzS": round(healthz_s, 3),
            "readyzS": round(readyz_s, 3),
            "firstTurnS": round(first_s, 3),
            "firstTtftMs": round(first.ttft * 1000, 2),
            "warmTtftMs": round(warm_ttft * 1000, 2),
            "firstTurnExtraTtftMs": round((first.ttft - warm_ttft) * 1000, 2),
            "idleRssMiB": round(server.rss() / 2**20, 1),
            "idleCpuS": round(server.cpu(), 3),
            "healthzCpuS": round(healthz_cpu, 3),
            "readyzCpuS": round(readyz_cpu, 3),
            "firstTurnCpuS": round(first_cpu, 3),
        }
    finally:
        await asyncio.to_thread(server.stop)


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 3)


KEYS = (
    "healthzS",
    "readyzS",
    "firstTurnS",
    "firstTtftMs",
    "warmTtftMs",
    "firstTurnExtraTtftMs",
    "idleRssMiB",
    "idleCpuS",
    "healthzCpuS",
    "readyzCpuS",
    "firstTurnCpuS",
)


def _summary(healthz: list[dict[str, float]], readyz: list[dict[str, float]]) -> dict[str, float]:
    """One variant's medians: the `healthz` mode's under the plain keys, the `readyz` mode's prefixed `ready`."""
    out = {key: _median(healthz, key) for key in KEYS}
    if readyz:
        out["readyzS"] = _median(readyz, "readyzS")
        out["readyzCpuS"] = _median(readyz, "readyzCpuS")
        for key in ("firstTurnS", "firstTtftMs", "firstTurnExtraTtftMs", "idleRssMiB", "firstTurnCpuS"):
            out["ready" + key[0].upper() + key[1:]] = _median(readyz, key)
    return out


async def cold_start(
    sim: procs.Server,
    rounds: int,
    base: str | None = None,
    bytecode: bool = False,
    env: dict[str, str] | None = None,
    provider: str = "anthropic",
) -> dict[str, Any]:
    """Both paths (and with `base`, the gateway's `app/` as of that git revision), each gateway in both modes,
    interleaved round by round in an order that turns each round. `env`: extra environment of every gateway."""
    variants = [("direct", "healthz"), ("gateway", "healthz"), ("gateway", "readyz")]
    if base:
        variants += [("base", "healthz"), ("base", "readyz")]
    runs: dict[tuple[str, str], list[dict[str, float]]] = {v: [] for v in variants}
    base_path = checkout(base, tempfile.mkdtemp(prefix="bench-base-")) if base else ""
    common: dict[str, str] = {}
    if bytecode:
        common = {"PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="bench-pycache-"), "PYTHONDONTWRITEBYTECODE": ""}

    async def run(name: str, mode: str) -> dict[str, float]:
        path = Path.DIRECT if name == "direct" else Path.GATEWAY
        extra = dict(common) if name == "direct" else {**common, **(env or {})}
        if name == "base":
            extra["PYTHONPATH"] = base_path
        return await _one(path, sim, mode, provider, **extra)

    try:
        if bytecode:  # one unrecorded start of each variant writes the bytecode of what it imports
            for name, mode in variants:
                if mode == "healthz":
                    await run(name, mode)
        for index in range(rounds):
            for name, mode in variants[index % len(variants) :] + variants[: index % len(variants)]:
                runs[(name, mode)].append(await run(name, mode))
    finally:
        if bytecode:  # tens of MiB of bytecode, this run's only
            shutil.rmtree(common["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    names = ["direct", "gateway"] + (["base"] if base else [])
    summary = {name: _summary(runs[(name, "healthz")], runs.get((name, "readyz"), [])) for name in names}
    gateway, direct = summary["gateway"], summary["direct"]
    result: dict[str, Any] = {
        "scenario": SCENARIO,
        "rounds": rounds,
        "bytecode": bytecode,
        "env": env or {},
        "provider": provider,
        **summary,
        "firstTurnS": gateway["firstTurnS"],
        "ratioToBare": round(gateway["firstTurnS"] / direct["firstTurnS"], 3),
        "firstTurnExtraTtftMs": gateway["firstTurnExtraTtftMs"],
        "idleRssMiB": gateway["idleRssMiB"],
        "perRound": {f"{name}/{mode}": entries for (name, mode), entries in runs.items()},
    }
    if base:
        result["baseRevision"] = base
        result["baseRatioToBare"] = round(summary["base"]["firstTurnS"] / direct["firstTurnS"], 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", help="also start the gateway's app/ as of this git revision (e.g. main)")
    parser.add_argument("--bytecode", action="store_true", help="compiled bytecode in a private cache, as the image")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="gateway environment")
    parser.add_argument("--provider", default="anthropic", help="the provider of the gateway's turns")
    parser.add_argument("--per-round", action="store_true", help="print every round's figures too")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)

    async def run() -> dict[str, Any]:
        sim = await asyncio.to_thread(procs.simulator)
        try:
            return await cold_start(sim, args.rounds, args.base, args.bytecode, env, args.provider)
        finally:
            sim.stop()

    load = os.getloadavg()
    result = uvloop.run(run())
    result["loadAverage"] = [round(x, 2) for x in (*load, *os.getloadavg())]
    print(json.dumps({k: v for k, v in result.items() if args.per_round or k != "perRound"}, indent=1))


if __name__ == "__main__":
    main()
