"""`python -m bench peers [--quick]` (or `python -m bench.peer_bench [--quick]`): this gateway beside Portkey.

Issue 42 states its CPU and memory targets against Portkey's gateway (`@portkey-ai/gateway`, pinned in
bench/peers/package.json, installed by `make peer-packages` or `npm ci --prefix bench/peers`). This scenario
runs both in one run against the same simulator upstream (its Anthropic wire, `/anthropic/v1/messages`):

- **portkey**: Portkey's OpenAI-compatible `/v1/chat/completions` (`stream: true`, the bare scenario as the
  model), routed by its headers `x-portkey-provider: anthropic` and `x-portkey-custom-host:
  <simulator>/anthropic/v1` (Portkey appends `/messages`; a loopback custom host is trusted by default), the
  key as `Authorization: Bearer`;
- **gateway-chat**: this gateway's Chat Completions door, the same client wire (`anthropic/<scenario>`);
- **gateway-stream**: this gateway's `/v1/stream` (`throttleMs: 0`);
- **direct**: the simulator itself, the yardstick (its CPU is the cost of *producing* the stream).

Each server process (this gateway under uvicorn, one worker; Portkey under Node) runs pinned alone to CPU 1
with `taskset`; the simulator and the load generator (this process) run on CPU 0. One frame per upstream delta
for all: the gateway runs with `GATEWAY_THROTTLE_MS=0` (no coalescing on any door) and `/v1/stream` is sent
`throttleMs: 0`; Portkey does not coalesce. Each figure reports the frames per stream the client counted.

Figures, the subjects interleaved round by round (the order turns each round), medians over rounds:

- CPU (user + system of the server's process tree, from /proc: bench/proctree.py) per 1,000 upstream events,
  unpaced 200-delta streams (206 Anthropic events each) at c=1 and c=50; the ratio to Portkey per round;
- CPU per short turn (5 unpaced deltas) at c=1 and c=20;
- added time to first text at c=1 (short turns; subject − direct per round);
- cold start (fresh processes, alternated): process start to the first 200 of the health route (`/healthz`;
  Portkey's `/`), and to the first streamed turn done (the Chat Completions wire, tried every 5 ms); the
  resident memory of the process tree once idle: once ready (the gateway's `/readyz`, its warm-up done), 5
  turns later and 3 s after them;
- peak resident memory of the process tree during the c=50 rounds;
- memory per open stream: a fresh process each (the gateway once ready), warmed with 20 short turns, then 1,000
  paced streams held open together (`slow;n=40;delay_ms=250`, starts spread over 2 s); (RSS while ≥ 98 % are
  open − idle) ÷ 1,000.

Portkey waits 25 ms before forwarding the first chunk of every stream (a `setTimeout(…, 25)` in its stream
reader): its added time to first text includes that sleep; its CPU does not.

Results: bench/results/peers.{json,md}. The machine is shared: compare within a run, and read the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any, Awaitable, Callable

import uvloop

from bench import procs, proctree
from bench.client import Path, StreamResult, Target, stream
from bench.peer_report import GATEWAY_SUBJECTS, SUBJECTS, markdown, rows
from bench.scenarios import _summarise, expected_text, paced
from bench.stats import median, ms, pct

PORTKEY_VERSION = "1.15.2"
PEERS = procs.ROOT / "bench" / "peers"
PORTKEY_PACKAGE = PEERS / "node_modules" / "@portkey-ai" / "gateway"
PORTKEY_SERVER = PORTKEY_PACKAGE / "build" / "start-server.js"
RESULTS = FsPath(__file__).resolve().parent / "results"

SERVER_CPU, CLIENT_CPU = 1, 0
SIZE = 8
LONG_N, SHORT_N = 200, 5
ANTHROPIC_EVENTS_BESIDES_DELTAS = 6  # message_start, block start, ping, block stop, message_delta, message_stop
NO_COALESCING = {"GATEWAY_THROTTLE_MS": "0"}


def missing() -> str | None:
    """Why Portkey cannot run here, or None."""
    if shutil.which("node") is None:
        return "node not found"
    if not PORTKEY_SERVER.exists():
        return "Portkey is not installed (make peer-packages, or npm ci --prefix bench/peers)"
    version = json.loads((PORTKEY_PACKAGE / "package.json").read_text()).get("version")
    if version != PORTKEY_VERSION:
        return f"bench/peers has Portkey {version}, not {PORTKEY_VERSION} (npm ci --prefix bench/peers)"
    return None


def pin_prefix(cpu: int) -> list[str]:
    """`taskset -c <cpu>` when the machine has that CPU and taskset is there (else the process runs unpinned)."""
    if shutil.which("taskset") and cpu < (os.cpu_count() or 1):
        return ["taskset", "-c", str(cpu)]
    return []


def portkey_command(port: int) -> list[str]:
    """Portkey's Node server on `port`, without its web UI and log stream (`--headless`)."""
    return ["node", str(PORTKEY_SERVER), f"--port={port}", "--headless"]


def portkey_headers(sim_url: str) -> tuple[tuple[str, str], ...]:
    """The headers that route a Portkey request to the simulator's Anthropic wire."""
    return (
        ("x-portkey-provider", "anthropic"),
        ("x-portkey-custom-host", f"{sim_url}/anthropic/v1"),
        ("Authorization", "Bearer bench-key"),
    )


@dataclass
class Launch:
    """A server not started yet: its `Server`, its command line (pinned), its port and extra environment."""

    server: procs.Server
    cmd: list[str]
    port: int
    env: dict[str, str]

    def start(self) -> procs.Server:
        """Run it and wait until its ready route (`Server.health`) answers 200."""
        return self.server.start_command(self.cmd, self.port, self.env)


def gateway_launch(sim: procs.Server, prefix: list[str]) -> Launch:
    """This gateway under uvicorn (one worker), coalescing off; ready once `/readyz` answers (warm-up done)."""
    server = procs.Server("gateway", "app.main:app", env=procs.gateway_env(sim, **NO_COALESCING), health="/readyz")
    cmd, port, env = server.uvicorn_command()
    return Launch(server, [*prefix, *cmd], port, env)


def portkey_launch(prefix: list[str]) -> Launch:
    server = procs.Server("portkey", "", health="/")
    port = procs.free_port()
    return Launch(server, [*prefix, *portkey_command(port)], port, {"NODE_ENV": "production"})


# The route that answers 200 once the server listens (the cold start's first figure); `Server.health` is the one
# that says it is ready (the gateway's `/readyz`: its warm-up has imported the served vendors' SDKs).
LIVENESS = {"gateway-chat": "/healthz", "portkey": "/"}


@dataclass
class Subject:
    """One way through: the client's target, and the server whose CPU and memory count for it."""

    name: str
    target: Target
    server: procs.Server

    def cpu(self) -> float:
        assert self.server.proc is not None
        return proctree.cpu_seconds(self.server.proc.pid)

    def rss(self) -> int:
        assert self.server.proc is not None
        return proctree.rss_bytes(self.server.proc.pid)


def subject_target(name: str, sim: procs.Server, server: procs.Server) -> Target:
    if name == "direct":
        return Target(Path.DIRECT, sim.port)
    if name == "portkey":
        return Target(Path.GATEWAY, server.port, door="portkey-chat", headers=portkey_headers(sim.url))
    return Target(Path.GATEWAY, server.port, door="openai-chat" if name == "gateway-chat" else "unified")


def _marker() -> str:
    return f"bench-{uuid.uuid4().hex[:16]}"


class PeakRss:
    """Samples a subject's process-tree RSS every `interval` seconds while in the block; keeps the peak."""

    def __init__(self, subject: Subject, interval: float = 0.05) -> None:
        self.subject, self.interval, self.peak = subject, interval, 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.subject.rss())
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> "PeakRss":
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        self.peak = max(self.peak, self.subject.rss())


async def batch(subject: Subject, sim: procs.Server, n: int, concurrency: int, per_worker: int) -> dict[str, Any]:
    """`concurrency` clients each running `per_worker` unpaced `n`-delta streams back to back: the server's CPU
    per 1,000 upstream events and per turn, time to first text, frames per stream, its peak RSS."""
    scenario, expected = paced(n, 0, SIZE), expected_text(n, SIZE)
    results: list[StreamResult] = []

    async def client() -> None:
        for _ in range(per_worker):
            results.append(await stream(subject.target, scenario, _marker(), throttle_ms=0))

    cpu0, sim0, wall0 = subject.cpu(), proctree.cpu_seconds(_pid(sim)), time.monotonic()
    async with PeakRss(subject) as peak:
        await asyncio.gather(*(client() for _ in range(concurrency)))
    cpu, wall = subject.cpu() - cpu0, time.monotonic() - wall0
    summary = _summarise(results, expected, SIZE)
    events = len(results) * (n + ANTHROPIC_EVENTS_BESIDES_DELTAS)
    ttfts = [r.ttft for r in results if r.ttft is not None]
    return {
        "streams": len(results),
        "failed": summary["failed"],
        "errors": summary["errors"],
        "lostFrames": summary["lostFrames"],
        "framesPerStream": round(summary["frames"] / max(len(results), 1), 2),
        "upstreamEvents": events,
        "wallS": round(wall, 3),
        "cpuS": round(cpu, 3),
        "simulatorCpuS": round(proctree.cpu_seconds(_pid(sim)) - sim0, 3),
        "cpuMsPer1k": round(cpu / events * 1e6, 3),
        "cpuMsPerTurn": round(cpu / max(len(results), 1) * 1000, 3),
        "ttftP50Ms": ms(pct(ttfts, 50)),
        "peakRssMiB": round(peak.peak / 2**20, 1),
    }


def _pid(server: procs.Server) -> int:
    assert server.proc is not None
    return server.proc.pid


MEDIANS = ("cpuMsPer1k", "cpuMsPerTurn", "ttftP50Ms", "framesPerStream")


async def level(
    subjects: list[Subject], sim: procs.Server, n: int, concurrency: int, per_worker: int, rounds: int
) -> dict[str, Any]:
    """Interleaved rounds of the same batch for every subject; medians, and each gateway way ÷ Portkey per round."""
    per_round: list[dict[str, dict[str, Any]]] = []
    for r in range(rounds):
        order = subjects[r % len(subjects) :] + subjects[: r % len(subjects)]
        per_round.append({s.name: await batch(s, sim, n, concurrency, per_worker) for s in order})
    out: dict[str, Any] = {"concurrency": concurrency, "perWorker": per_worker, "rounds": per_round}
    for s in subjects:
        rows = [entry[s.name] for entry in per_round]
        out[s.name] = {key: median(row[key] for row in rows) for key in MEDIANS} | {
            "peakRssMiB": max(row["peakRssMiB"] for row in rows),  # the peak over all rounds
            "failed": sum(row["failed"] for row in rows),
            "lostFrames": sum(row["lostFrames"] for row in rows),
        }
        if s.name != "direct":
            out[s.name]["addedTtftMs"] = median(
                entry[s.name]["ttftP50Ms"] - entry["direct"]["ttftP50Ms"]
                for entry in per_round
                if entry[s.name]["ttftP50Ms"] is not None and entry["direct"]["ttftP50Ms"] is not None
            )
    out["overPortkey"] = over_portkey(per_round)
    return out


def over_portkey(per_round: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Each gateway way's CPU ÷ Portkey's in the same round, the median over rounds (the machine's load moves
    between rounds more than between the subjects of one round)."""
    return {
        name: {
            key: median(entry[name][key] / entry["portkey"][key] for entry in per_round if entry["portkey"][key])
            for key in ("cpuMsPer1k", "cpuMsPerTurn")
        }
        for name in GATEWAY_SUBJECTS
    }


# ---------------------------------------------------------------------- cold start, memory per open stream


async def http_status(port: int, path: str) -> int | None:
    """The status of one `GET path` on loopback, or None while nothing listens."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        line = await reader.readline()
        return int(line.split()[1]) if line else None
    except (OSError, ValueError, IndexError):
        return None
    finally:
        writer.close()


async def _until(what: Callable[[], Awaitable[bool]], server: procs.Server, started: float) -> float:
    """Seconds from `started` until `what()` holds, trying every 5 ms."""
    while not await what():
        assert server.popen is not None
        if server.popen.poll() is not None:
            raise RuntimeError(f"{server.name} exited: {server.stderr()[-2000:]}")
        if time.monotonic() - started > 120:
            raise RuntimeError(f"{server.name}: not done within 120 s")
        await asyncio.sleep(0.005)
    return time.monotonic() - started


async def cold_start_once(name: str, launch: Callable[[], Launch], sim: procs.Server) -> dict[str, float]:
    """One fresh process: to its health route's first 200, to its first short turn done; its idle RSS once it is
    ready (the gateway's warm-up done), 5 turns later and 3 s after them."""
    fresh = launch()
    server, port = fresh.server, fresh.port
    short = paced(SHORT_N, 0, SIZE)
    started = time.monotonic()
    server.spawn(fresh.cmd, port, fresh.env)
    try:
        target = subject_target(name, sim, server)
        healthy = await _until(lambda: _is(http_status(port, LIVENESS[name]), 200), server, started)

        async def turn_done() -> bool:
            return (await stream(target, short, _marker(), throttle_ms=0)).completed

        first_turn = await _until(turn_done, server, started)
        await _until(lambda: _is(http_status(port, server.health), 200), server, started)
        for _ in range(5):
            await stream(target, short, _marker(), throttle_ms=0)
        await asyncio.sleep(3.0)
        return {
            "healthS": round(healthy, 3),
            "firstTurnS": round(first_turn, 3),
            "idleRssMiB": round(proctree.rss_bytes(_pid(server)) / 2**20, 1),
        }
    finally:
        await asyncio.to_thread(server.stop)


async def _is(status: Awaitable[int | None], want: int) -> bool:
    return await status == want


async def open_streams(subject: Subject, count: int, quick: bool) -> dict[str, Any]:
    """`count` paced streams held open together on a fresh, warmed process: RSS per open stream."""
    n, delay = (24, 250) if quick else (40, 250)
    scenario, expected = paced(n, delay, SIZE), expected_text(n, SIZE)
    await asyncio.gather(*(stream(subject.target, paced(SHORT_N, 0, SIZE), _marker()) for _ in range(20)))
    await asyncio.sleep(0.5)
    idle = subject.rss()
    in_flight, all_open = 0, 0

    async def one(offset: float) -> StreamResult:
        nonlocal in_flight
        await asyncio.sleep(offset)
        in_flight += 1
        try:
            return await stream(subject.target, scenario, _marker(), throttle_ms=0)
        finally:
            in_flight -= 1

    async def watch() -> None:
        nonlocal all_open
        while True:
            await asyncio.sleep(0.1)
            if in_flight >= count * 0.98:
                all_open = max(all_open, subject.rss())

    offsets = [i * 2.0 / count for i in range(count)]
    watcher = asyncio.create_task(watch())
    results = await asyncio.gather(*(one(o) for o in offsets))
    watcher.cancel()
    summary = _summarise(list(results), expected, SIZE)
    return {
        "streams": count,
        "scenario": scenario,
        "idleRssMiB": round(idle / 2**20, 1),
        "rssAllOpenMiB": round(all_open / 2**20, 1) if all_open else None,
        "kbPerStream": round((all_open - idle) / count / 1024, 1) if all_open else None,
        "failed": summary["failed"],
        "lostFrames": summary["lostFrames"],
        "errors": summary["errors"],
    }


# ---------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Plan:
    rounds: int
    long_c1: int  # streams per round at c=1
    long_c50: int  # streams per client at c=50
    short_c1: int
    short_c20: int
    cold_rounds: int
    open_streams: int = 1000

    @classmethod
    def make(cls, quick: bool) -> "Plan":
        if quick:
            return cls(rounds=2, long_c1=40, long_c50=2, short_c1=100, short_c20=10, cold_rounds=2)
        return cls(rounds=3, long_c1=100, long_c50=4, short_c1=300, short_c20=20, cold_rounds=3)


async def run(quick: bool = False) -> dict[str, Any]:
    """The whole scenario; writes bench/results/peers.{json,md}. Skipped (one line) when Portkey is missing."""
    reason = missing()
    if reason:
        print(f"[bench] peers skipped: {reason}", flush=True)
        return {"skipped": reason}
    plan = Plan.make(quick)
    server_pin, client_pin = pin_prefix(SERVER_CPU), pin_prefix(CLIENT_CPU)
    affinity = os.sched_getaffinity(0)
    if client_pin:
        os.sched_setaffinity(0, {CLIENT_CPU})  # the load generator's event loop thread
    load0 = os.getloadavg()
    sim = await asyncio.to_thread(_start_simulator, client_pin)
    servers: list[procs.Server] = []
    try:
        gateway = await asyncio.to_thread(gateway_launch(sim, server_pin).start)
        servers.append(gateway)
        portkey = await asyncio.to_thread(portkey_launch(server_pin).start)
        servers.append(portkey)
        by_name = {"direct": sim, "gateway-chat": gateway, "gateway-stream": gateway, "portkey": portkey}
        subjects = [Subject(name, subject_target(name, sim, by_name[name]), by_name[name]) for name in SUBJECTS]
        for s in subjects:  # warm up: imports, connection pools, JIT
            await asyncio.gather(*(stream(s.target, paced(SHORT_N, 0, SIZE), _marker()) for _ in range(20)))
        result: dict[str, Any] = {
            "portkeyVersion": PORTKEY_VERSION,
            "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(),
            "pinned": {
                "servers": " ".join(server_pin) or "unpinned",
                "simulatorAndLoadGenerator": " ".join(client_pin) or "unpinned",
            },
            "gatewayCoalescing": "off: GATEWAY_THROTTLE_MS=0, /v1/stream throttleMs 0",
            "quick": quick,
            "eventsPerLongStream": LONG_N + ANTHROPIC_EVENTS_BESIDES_DELTAS,
        }
        result["long"] = {
            "scenario": paced(LONG_N, 0, SIZE),
            "c1": await level(subjects, sim, LONG_N, 1, plan.long_c1, plan.rounds),
            "c50": await level(subjects, sim, LONG_N, 50, plan.long_c50, plan.rounds),
        }
        result["short"] = {
            "scenario": paced(SHORT_N, 0, SIZE),
            "c1": await level(subjects, sim, SHORT_N, 1, plan.short_c1, plan.rounds),
            "c20": await level(subjects, sim, SHORT_N, 20, plan.short_c20, plan.rounds),
        }
        for server in servers:
            await asyncio.to_thread(server.stop)
        servers.clear()
        launches: dict[str, Callable[[], Launch]] = {
            "gateway-chat": lambda: gateway_launch(sim, server_pin),
            "portkey": lambda: portkey_launch(server_pin),
        }
        cold: dict[str, list[dict[str, float]]] = {name: [] for name in launches}
        for r in range(plan.cold_rounds):
            for name in list(launches)[r % 2 :] + list(launches)[: r % 2]:
                cold[name].append(await cold_start_once(name, launches[name], sim))
        result["coldStart"] = {
            name: {key: median(row[key] for row in rows) for key in ("healthS", "firstTurnS", "idleRssMiB")}
            | {"perRound": rows}
            for name, rows in cold.items()
        }
        result["openStreams"] = {}
        for name, launch in launches.items():
            server = await asyncio.to_thread(launch().start)
            servers.append(server)
            subject = Subject(name, subject_target(name, sim, server), server)
            result["openStreams"][name] = await open_streams(subject, plan.open_streams, quick)
            await asyncio.to_thread(server.stop)
            servers.remove(server)
    finally:
        for server in servers:
            await asyncio.to_thread(server.stop)
        await asyncio.to_thread(sim.stop)
        os.sched_setaffinity(0, affinity)
    result["loadAverage1m"] = {"start": round(load0[0], 2), "end": round(os.getloadavg()[0], 2)}
    result["table"] = rows(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "peers.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "peers.md").write_text(markdown(result))
    return result


def _start_simulator(prefix: list[str]) -> procs.Server:
    server = procs.Server("simulator", "simulator.app:app", health="/_sim/requests?contains=healthcheck")
    cmd, port, env = server.uvicorn_command()
    return server.start_command([*prefix, *cmd], port, env)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="fewer rounds and streams")
    args = parser.parse_args()
    procs.raise_fd_limit()
    result = uvloop.run(run(args.quick))
    print(markdown(result) if "skipped" not in result else result["skipped"])


if __name__ == "__main__":
    main()
