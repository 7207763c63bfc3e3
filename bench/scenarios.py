"""The six scenarios. Each runs the direct path and the gateway path in the same process, interleaved
round by round (D G, then G D, …), and reports gateway − direct and gateway / direct per round with the
median over the rounds. See bench/README.md for what each figure means."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import psutil

from bench import procs
from bench.client import AGENT_SYSTEM, AGENT_TOOLS, Path, StreamResult, Target, slow_read, stream
from bench.stats import compare, median, ms, pct

PACED_N, PACED_DELAY_MS, PACED_SIZE = 64, 20, 8
GAP_TARGET_MS = 10.0


def paced(n: int = PACED_N, delay_ms: float = PACED_DELAY_MS, size: int = PACED_SIZE) -> str:
    return f"slow;n={n};delay_ms={delay_ms:g};size={size}"


def expected_text(n: int, size: int) -> str:
    return "".join(f"{i:0{max(size - 1, 1)}d} "[:size] for i in range(n))


def lost_frames(result: StreamResult, expected: str, size: int) -> int:
    """Deltas that never reached the client: compares concatenated text, so coalesced frames count right."""
    got = result.joined
    if got == expected:
        return 0
    same = 0
    for a, b in zip(got, expected):
        if a != b:
            break
        same += 1
    return (len(expected) - same + size - 1) // size


@dataclass
class Config:
    quick: bool = False
    seed: int = 7


class Bench:
    """The simulator, the gateway and the load generator (this process)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.quick = config.quick
        self.rng = random.Random(config.seed)
        self.me = psutil.Process()
        self.sim = procs.simulator()
        self.gw_env: dict[str, str] = {}
        self.database_url: str | None = os.environ.get("BENCH_DATABASE_URL")
        self.gw = procs.gateway(self.sim, self.database_url)
        self.http = httpx.AsyncClient(timeout=30)

    # ------------------------------------------------------------------ plumbing

    def target(self, path: Path) -> Target:
        return Target(path, self.sim.port if path is Path.DIRECT else self.gw.port)

    async def restart_gateway(self, database_url: str | None = None, workers: int = 1, **env: str) -> None:
        self.gw.stop()
        self.database_url = database_url
        self.gw = await asyncio.to_thread(procs.gateway, self.sim, database_url, workers, **env)
        await self.warmup()

    async def close(self) -> None:
        await self.http.aclose()
        self.gw.stop()
        self.sim.stop()

    async def forget(self) -> None:
        """Clear the simulator's request log so its look-ups stay cheap."""
        await self.http.delete(f"{self.sim.url}/_sim/requests")

    async def warmup(self) -> None:
        for path in Path:
            await asyncio.gather(*(stream(self.target(path), paced(8, 1), f"warmup-{i}") for i in range(20)))
        await self.forget()

    def _marker(self) -> str:
        return f"bench-{uuid.uuid4().hex[:16]}"

    # ------------------------------------------------------------------ one batch of paced streams

    async def batch(
        self,
        path: Path,
        concurrency: int,
        *,
        per_worker: int = 1,
        n: int = PACED_N,
        delay_ms: float = PACED_DELAY_MS,
        size: int = PACED_SIZE,
        ramp: float | None = None,
        throttle_ms: int | None = 0,
    ) -> dict[str, Any]:
        """`concurrency` workers each run `per_worker` streams back to back; worker starts are spread over
        `ramp` seconds (default: one stream's duration) so the streams' pacing phases are not synchronised."""
        target = self.target(path)
        scenario = paced(n, delay_ms, size)
        expected = expected_text(n, size)
        ramp = (n + 3) * delay_ms / 1000 if ramp is None else ramp
        offsets = [self.rng.uniform(0, ramp) if concurrency > 1 else 0.0 for _ in range(concurrency)]
        results: list[StreamResult] = []
        in_flight = 0
        peak_in_flight = 0

        async def worker(offset: float) -> None:
            nonlocal in_flight, peak_in_flight
            await asyncio.sleep(offset)
            for _ in range(per_worker):
                in_flight += 1
                peak_in_flight = max(peak_in_flight, in_flight)
                results.append(await stream(target, scenario, self._marker(), throttle_ms=throttle_ms))
                in_flight -= 1

        usage = _Usage(self)
        await asyncio.gather(*(worker(o) for o in offsets))
        out = _summarise(results, expected, size)
        out.update(usage.done(), concurrency=concurrency, peakInFlight=peak_in_flight, path=path.value)
        return out

    async def compare_paced(self, concurrency: int, rounds: int, **kwargs: Any) -> dict[str, Any]:
        """Interleaved rounds of the same batch on both paths; per-round differences and their medians."""
        per_round = []
        for r in range(rounds):
            order = (Path.DIRECT, Path.GATEWAY) if r % 2 == 0 else (Path.GATEWAY, Path.DIRECT)
            entry = {}
            for path in order:
                entry[path.value] = await self.batch(path, concurrency, **kwargs)
            per_round.append(entry)
            await self.forget()
        keys = ("ttftP50Ms", "ttftP99Ms", "gapP50Ms", "gapP99Ms")
        summary = compare(per_round, keys)
        gw = [r["gateway"] for r in per_round]
        return {
            "concurrency": concurrency,
            "rounds": per_round,
            **summary,
            "lostFrames": sum(r["lostFrames"] for r in gw),
            "failedStreams": sum(r["failed"] for r in gw),
            "directLostFrames": sum(r["direct"]["lostFrames"] for r in per_round),
            "loadgenCpuShare": max(r[p]["loadgenCpuShare"] for r in per_round for p in ("direct", "gateway")),
            "gatewayCpuShare": median(r["gatewayCpuShare"] for r in gw),
            "directGapP99Ms": median(r["direct"]["gapP99Ms"] for r in per_round),
        }


class _Usage:
    """CPU of the three processes over one batch, as shares of one core."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.wall = time.monotonic()
        self.me = procs.cpu_seconds(bench.me)
        self.gw = bench.gw.cpu()
        self.sim = bench.sim.cpu()

    def done(self) -> dict[str, float]:
        b = self.bench
        wall = time.monotonic() - self.wall
        return {
            "wallS": round(wall, 3),
            "loadgenCpuShare": round((procs.cpu_seconds(b.me) - self.me) / wall, 3),
            "gatewayCpuShare": round((b.gw.cpu() - self.gw) / wall, 3),
            "simulatorCpuShare": round((b.sim.cpu() - self.sim) / wall, 3),
            "gatewayCpuS": round(b.gw.cpu() - self.gw, 3),
            "simulatorCpuS": round(b.sim.cpu() - self.sim, 3),
        }


def _summarise(results: list[StreamResult], expected: str, size: int) -> dict[str, Any]:
    ttfts = [r.ttft for r in results if r.ttft is not None]
    gaps = [g for r in results for g in r.gaps]
    failed = [r for r in results if not r.completed or r.status != 200]
    return {
        "streams": len(results),
        "failed": len(failed),
        "errors": sorted({r.error or f"status {r.status}" for r in failed})[:5],
        "lostFrames": sum(lost_frames(r, expected, size) for r in results),
        "frames": sum(len(r.delta_times) for r in results),
        "ttftP50Ms": ms(pct(ttfts, 50)),
        "ttftP99Ms": ms(pct(ttfts, 99)),
        "gapP50Ms": ms(pct(gaps, 50)),
        "gapP99Ms": ms(pct(gaps, 99)),
    }


# ---------------------------------------------------------------------- 1. added time to first token


async def ttft(bench: Bench, levels: list[int] | None = None) -> dict[str, Any]:
    """Added TTFT (and inter-frame gap) at concurrency 1, 50, 500 on paced streams, coalescing off."""
    levels = levels or [1, 50, 500]
    out = []
    for c in levels:
        if c == 1:
            plan = {"per_worker": 5 if bench.quick else 10, "rounds": 3 if bench.quick else 5}
        elif c < 200:
            plan = {"per_worker": 2, "rounds": 2 if bench.quick else 3}
        else:  # one gateway worker saturates here: keep the run short
            plan = {"per_worker": 1, "rounds": 2}
        rounds = plan.pop("rounds")
        out.append(await bench.compare_paced(c, rounds, **plan))
    return {"scenario": paced(), "throttleMs": 0, "levels": out}


# ---------------------------------------------------------------------- 2. CPU per 1,000 upstream events


async def cpu(bench: Bench) -> dict[str, Any]:
    """Gateway CPU seconds per 1,000 upstream events on unpaced streams, coalescing at the default and off."""
    n, size, streams = (2000, 8, 4) if bench.quick else (5000, 8, 4)
    rounds = 2 if bench.quick else 3
    scenario = paced(n, 0, size)
    expected = expected_text(n, size)
    events_per_stream = n + 6  # message_start, content_block_start, ping, n deltas, block stop, message_delta, stop
    out: dict[str, Any] = {"scenario": scenario, "streamsPerRound": streams, "eventsPerStream": events_per_stream}
    for label, throttle in (("default", None), ("off", 0)):
        per_round = []
        for r in range(rounds):
            order = (Path.DIRECT, Path.GATEWAY) if r % 2 == 0 else (Path.GATEWAY, Path.DIRECT)
            entry = {}
            for path in order:
                usage = _Usage(bench)
                results = await asyncio.gather(
                    *(
                        stream(bench.target(path), scenario, bench._marker(), throttle_ms=throttle)
                        for _ in range(streams)
                    )
                )
                u = usage.done()
                events = streams * events_per_stream
                summary = _summarise(list(results), expected, size)
                entry[path.value] = {
                    **u,
                    **summary,
                    "upstreamEvents": events,
                    "eventsPerS": round(events / u["wallS"]),
                    "gatewayCpuMsPer1k": round(u["gatewayCpuS"] / events * 1e6, 3),
                    "simulatorCpuMsPer1k": round(u["simulatorCpuS"] / events * 1e6, 3),
                    "framesPerStream": summary["frames"] / streams,
                }
            per_round.append(entry)
            await bench.forget()
        gw = [r["gateway"] for r in per_round]
        out[label] = {
            "throttleMs": "server default" if throttle is None else throttle,
            "rounds": per_round,
            "gatewayCpuMsPer1k": median(g["gatewayCpuMsPer1k"] for g in gw),
            "simulatorCpuMsPer1k": median(g["simulatorCpuMsPer1k"] for g in gw),
            "gatewayOverSimulatorCpu": median(
                g["gatewayCpuMsPer1k"] / g["simulatorCpuMsPer1k"] for g in gw if g["simulatorCpuMsPer1k"]
            ),
            "throughputRatio": median(r["gateway"]["eventsPerS"] / r["direct"]["eventsPerS"] for r in per_round),
            "gatewayEventsPerS": median(g["eventsPerS"] for g in gw),
            "directEventsPerS": median(r["direct"]["eventsPerS"] for r in per_round),
            "framesPerStream": median(g["framesPerStream"] for g in gw),
            "lostFrames": sum(g["lostFrames"] for g in gw),
            "loadgenCpuShare": max(r[p]["loadgenCpuShare"] for r in per_round for p in ("direct", "gateway")),
        }
    return out


API_PROVIDERS = {
    "anthropic-messages": "anthropic",
    "openai-responses": "openai",
    "google-generative-ai": "google",
    "openai-completions": "compat",
}


async def cpu_apis(bench: Bench) -> dict[str, Any]:
    """Gateway CPU per 1,000 upstream events for each api, in the same run: the same unpaced scenario played
    in each vendor's wire format, through the gateway only, coalescing at the server default. Upstream events
    are the frames the simulator sent (each format frames the same deltas differently)."""
    n, size, streams = (2000, 8, 4) if bench.quick else (5000, 8, 4)
    rounds = 2 if bench.quick else 3
    scenario = paced(n, 0, size)
    expected = expected_text(n, size)
    out: dict[str, Any] = {"scenario": scenario, "streamsPerRound": streams, "rounds": rounds, "apis": {}}
    per_api: dict[str, list[dict[str, Any]]] = {api: [] for api in API_PROVIDERS}
    for r in range(rounds):
        order = list(API_PROVIDERS) if r % 2 == 0 else list(reversed(API_PROVIDERS))
        for api in order:
            target = Target(Path.GATEWAY, bench.gw.port, provider=API_PROVIDERS[api])
            mark = bench._marker()
            usage = _Usage(bench)
            results = await asyncio.gather(
                *(stream(target, scenario, f"{mark}-{i}", throttle_ms=None) for i in range(streams))
            )
            u = usage.done()
            seen = (await bench.http.get(f"{bench.sim.url}/_sim/requests", params={"contains": mark})).json()
            events = sum(e["framesSent"] for e in seen)
            summary = _summarise(list(results), expected, size)
            per_api[api].append(
                {
                    **u,
                    "upstreamEvents": events,
                    "lostFrames": summary["lostFrames"],
                    "gatewayCpuMsPer1k": round(u["gatewayCpuS"] / events * 1e6, 3) if events else None,
                    "gatewayCpuMsPer1kDeltas": round(u["gatewayCpuS"] / (streams * n) * 1e6, 3),
                }
            )
            await bench.forget()
    for api, rows in per_api.items():
        out["apis"][api] = {
            "provider": API_PROVIDERS[api],
            "upstreamEventsPerStream": median(row["upstreamEvents"] / streams for row in rows),
            "gatewayCpuMsPer1k": median(row["gatewayCpuMsPer1k"] for row in rows if row["gatewayCpuMsPer1k"]),
            "gatewayCpuMsPer1kDeltas": median(row["gatewayCpuMsPer1kDeltas"] for row in rows),
            "lostFrames": sum(row["lostFrames"] for row in rows),
            "perRound": rows,
        }
    return out


DOORS = ("unified", "openai-chat", "anthropic-messages", "openai-responses", "gemini")


async def doors(bench: Bench) -> dict[str, Any]:
    """Each door against `/v1/stream` in the same run, coalescing at the server default on both (the Chat
    Completions door has no per-request window): gateway CPU per 1,000 upstream events on unpaced streams,
    interleaved round by round; and the added time to first token on paced streams at concurrency 1, as the
    median of per-pair differences (each door's stream right after a `/v1/stream` one, so both see the same
    machine load)."""
    n, size, streams = (2000, 8, 4) if bench.quick else (5000, 8, 4)
    rounds = 3 if bench.quick else 5
    pairs = 20 if bench.quick else 60
    unpaced, paced_ = paced(n, 0, size), paced(4, 20, size)
    expected = expected_text(n, size)
    rows: dict[str, list[dict[str, Any]]] = {door: [] for door in DOORS}
    for r in range(rounds):
        for door in DOORS if r % 2 == 0 else tuple(reversed(DOORS)):
            target = Target(Path.GATEWAY, bench.gw.port, door=door)
            mark = bench._marker()
            usage = _Usage(bench)
            results = await asyncio.gather(
                *(stream(target, unpaced, f"{mark}-{i}", throttle_ms=None) for i in range(streams))
            )
            u = usage.done()
            seen = (await bench.http.get(f"{bench.sim.url}/_sim/requests", params={"contains": mark})).json()
            events = sum(e["framesSent"] for e in seen)
            summary = _summarise(list(results), expected, size)
            rows[door].append(
                {
                    **u,
                    "upstreamEvents": events,
                    "lostFrames": summary["lostFrames"],
                    "failed": summary["failed"],
                    "gatewayCpuMsPer1k": round(u["gatewayCpuS"] / events * 1e6, 3) if events else None,
                }
            )
            await bench.forget()
    ttfts: dict[str, list[float]] = {door: [] for door in DOORS}
    for i in range(pairs):  # one stream at a time; the order inside a pair alternates
        for door in DOORS if i % 2 == 0 else tuple(reversed(DOORS)):
            result = await stream(
                Target(Path.GATEWAY, bench.gw.port, door=door), paced_, bench._marker(), throttle_ms=None
            )
            ttfts[door].append(result.ttft if result.ttft is not None else float("nan"))
    await bench.forget()
    base = rows["unified"]
    out: dict[str, Any] = {"unpaced": unpaced, "paced": paced_, "streamsPerRound": streams, "rounds": rounds,
                           "ttftPairs": pairs, "doors": {}}  # fmt: skip
    for door, door_rows in rows.items():
        diffs = [a - b for a, b in zip(ttfts[door], ttfts["unified"]) if a == a and b == b]
        out["doors"][door] = {
            "gatewayCpuMsPer1k": median(row["gatewayCpuMsPer1k"] for row in door_rows if row["gatewayCpuMsPer1k"]),
            # Per round against /v1/stream of the same round, then the median over the rounds.
            "cpuRatioToUnified": median(
                row["gatewayCpuMsPer1k"] / ref["gatewayCpuMsPer1k"]
                for row, ref in zip(door_rows, base)
                if row["gatewayCpuMsPer1k"] and ref["gatewayCpuMsPer1k"]
            ),
            "ttftP50Ms": ms(pct([t for t in ttfts[door] if t == t], 50)),
            "addedTtftMs": ms(statistics.median(diffs)) if diffs else None,
            "lostFrames": sum(row["lostFrames"] for row in door_rows),
            "failedStreams": sum(row["failed"] for row in door_rows),
            "perRound": door_rows,
        }
    return out


AGENT_DOORS = ("unified", "anthropic-messages", "gemini")


async def agent_doors(bench: Bench) -> dict[str, Any]:
    """The Messages door against `/v1/stream` for a coding agent's turn (Claude Code's size: a 50 KB system
    prompt and 20 tools, `bench.client.AGENT_*`; a short text answer from an Anthropic upstream): gateway CPU
    per turn, `turns` turns 4 at a time per door and round, the doors interleaved round by round, and the
    ratio per round against `/v1/stream` of the same round (median over the rounds). The request's decoding
    and translation are what differ: the answer is the same few deltas on both."""
    turns, parallel = (60, 4) if bench.quick else (200, 4)
    rounds = 3 if bench.quick else 5
    scenario = "text"
    rows: dict[str, list[dict[str, Any]]] = {door: [] for door in AGENT_DOORS}
    for r in range(rounds):
        for door in AGENT_DOORS if r % 2 == 0 else tuple(reversed(AGENT_DOORS)):
            target = Target(Path.GATEWAY, bench.gw.port, door=door, agent=True)
            mark = bench._marker()
            results: list[StreamResult] = []
            usage = _Usage(bench)
            for start in range(0, turns, parallel):
                results += await asyncio.gather(
                    *(stream(target, scenario, f"{mark}-{i}", throttle_ms=None) for i in range(start, start + parallel))
                )
            u = usage.done()
            failed = [x for x in results if not x.completed or x.status != 200]
            rows[door].append({**u, "turns": turns, "failed": len(failed),
                               "errors": sorted({x.error or f"status {x.status}" for x in failed})[:3],
                               "gatewayCpuMsPerTurn": round(u["gatewayCpuS"] / turns * 1000, 3)})  # fmt: skip
            await bench.forget()
    base = rows["unified"]
    out: dict[str, Any] = {"scenario": scenario, "systemBytes": len(AGENT_SYSTEM), "tools": len(AGENT_TOOLS),
                           "turnsPerRound": turns, "parallel": parallel, "rounds": rounds, "doors": {}}  # fmt: skip
    for door, door_rows in rows.items():
        out["doors"][door] = {
            "gatewayCpuMsPerTurn": median(row["gatewayCpuMsPerTurn"] for row in door_rows),
            "cpuRatioToUnified": median(
                row["gatewayCpuMsPerTurn"] / ref["gatewayCpuMsPerTurn"]
                for row, ref in zip(door_rows, base)
                if ref["gatewayCpuMsPerTurn"]
            ),
            "failedTurns": sum(row["failed"] for row in door_rows),
            "perRound": door_rows,
        }
    return out


# ---------------------------------------------------------------------- 2d. short turns per second


SHORT_N = 5  # text deltas of a short turn


async def closed_loop(bench: Bench, path: Path, concurrency: int, seconds: float) -> dict[str, Any]:
    """`concurrency` clients each running short unpaced turns back to back for `seconds`: turns per second,
    time to first delta, and the servers' CPU per turn."""
    target = bench.target(path)
    scenario = paced(SHORT_N, 0, PACED_SIZE)
    expected = expected_text(SHORT_N, PACED_SIZE)
    results: list[StreamResult] = []
    deadline = time.monotonic() + seconds

    async def client() -> None:
        while time.monotonic() < deadline:
            results.append(await stream(target, scenario, bench._marker(), throttle_ms=None))

    usage = _Usage(bench)
    await asyncio.gather(*(client() for _ in range(concurrency)))
    u = usage.done()
    out = _summarise(results, expected, PACED_SIZE)
    done = max(len(results), 1)
    out.update(
        u,
        concurrency=concurrency,
        path=path.value,
        turnsPerS=round(len(results) / u["wallS"], 1),
        gatewayCpuMsPerTurn=round(u["gatewayCpuS"] / done * 1000, 3),
        simulatorCpuMsPerTurn=round(u["simulatorCpuS"] / done * 1000, 3),
    )
    return out


async def turns(bench: Bench, levels: list[int] | None = None) -> dict[str, Any]:
    """Short turns (5 unpaced deltas, ledger on as by default, coalescing at the server default) run back to
    back by c clients, both paths interleaved: turns per second and the gateway's CPU per turn."""
    levels = levels or [1, 50]
    seconds = 2.0 if bench.quick else 5.0
    rounds = 2 if bench.quick else 3
    out: dict[str, Any] = {
        "scenario": paced(SHORT_N, 0, PACED_SIZE),
        "secondsPerRound": seconds,
        "workers": bench.gw.workers,
        "levels": [],
    }
    for c in levels:
        per_round = []
        for r in range(rounds):
            order = (Path.DIRECT, Path.GATEWAY) if r % 2 == 0 else (Path.GATEWAY, Path.DIRECT)
            per_round.append({path.value: await closed_loop(bench, path, c, seconds) for path in order})
            await bench.forget()
        gw = [r["gateway"] for r in per_round]
        out["levels"].append(
            {
                "concurrency": c,
                "rounds": per_round,
                **compare(per_round, ("ttftP50Ms", "ttftP99Ms", "turnsPerS")),
                "gatewayTurnsPerS": median(g["turnsPerS"] for g in gw),
                "directTurnsPerS": median(r["direct"]["turnsPerS"] for r in per_round),
                "gatewayCpuMsPerTurn": median(g["gatewayCpuMsPerTurn"] for g in gw),
                "gatewayCpuShare": median(g["gatewayCpuShare"] for g in gw),
                "failedStreams": sum(g["failed"] for g in gw),
                "lostFrames": sum(g["lostFrames"] for g in gw),
                "loadgenCpuShare": max(r[p]["loadgenCpuShare"] for r in per_round for p in ("direct", "gateway")),
            }
        )
    return out


async def idle(bench: Bench, pauses_ms: tuple[float, ...] = (0, 20, 100), pairs: int | None = None) -> dict[str, Any]:
    """Added TTFT one turn at a time, gateway and direct in pairs, with the load generator idle for each pause
    after every turn: a short turn (unpaced) and a paced stream's first delta (3 deltas 20 ms apart). At
    concurrency 1 a paced stream's request comes after the previous stream's 1.3 s; this shows how much of
    its added TTFT is that idle time rather than the pacing (docs/performance.md, What bounds the rest)."""
    pairs = pairs or (20 if bench.quick else 60)
    kinds = {"short": paced(SHORT_N, 0, PACED_SIZE), "paced": paced(3, PACED_DELAY_MS, PACED_SIZE)}
    out: dict[str, Any] = {"pairs": pairs, "scenarios": kinds, "levels": []}
    for pause in pauses_ms:
        level: dict[str, Any] = {"pauseMs": pause}
        for kind, scenario in kinds.items():
            ttfts: dict[Path, list[float]] = {Path.DIRECT: [], Path.GATEWAY: []}
            diffs: list[float] = []
            for i in range(pairs):
                pair: dict[Path, float | None] = {}
                for path in (Path.DIRECT, Path.GATEWAY) if i % 2 == 0 else (Path.GATEWAY, Path.DIRECT):
                    pair[path] = (await stream(bench.target(path), scenario, bench._marker(), throttle_ms=0)).ttft
                    await asyncio.sleep(pause / 1000)
                direct, gateway = pair[Path.DIRECT], pair[Path.GATEWAY]
                if direct is not None and gateway is not None:
                    ttfts[Path.DIRECT].append(direct)
                    ttfts[Path.GATEWAY].append(gateway)
                    diffs.append(gateway - direct)
            level[kind] = {"directTtftP50Ms": ms(pct(ttfts[Path.DIRECT], 50)),
                           "gatewayTtftP50Ms": ms(pct(ttfts[Path.GATEWAY], 50)),
                           "addedTtftMs": ms(pct(diffs, 50)), "failed": pairs - len(diffs)}  # fmt: skip
        out["levels"].append(level)
        await bench.forget()
    return out


# ---------------------------------------------------------------------- 3. concurrency and RSS per stream


def baseline_held(level: dict[str, Any], delay_ms: float = PACED_DELAY_MS) -> bool:
    """The direct path kept its pacing at this level: its own gap p99 within `GAP_TARGET_MS` of the delay."""
    direct = level.get("directGapP99Ms")
    return direct is not None and direct < delay_ms + GAP_TARGET_MS


def sustained(levels: list[dict[str, Any]]) -> int:
    """The highest concurrency up to which every level passed with the direct path holding its pacing (levels
    in ascending order). A level where the direct path itself misses its pacing (the simulator and the load
    generator saturate the machine) measures the machine, not the gateway: its own gaps grow, so the
    gateway's *added* gap shrinks or turns negative. Such a level, and any above a failed one, does not count."""
    best = 0
    for level in levels:
        if not _sustains(level):
            break
        best = level["concurrency"]
    return best


def _sustains(level: dict[str, Any]) -> bool:
    return level["passed"] and baseline_held(level)


async def paced_level(bench: Bench, concurrency: int) -> dict[str, Any]:
    """One level of a paced sweep, both paths: `passed` when no frame was lost and the added gap p99 < 10 ms."""
    level = await bench.compare_paced(concurrency, 1, per_worker=2)
    gap = level["added"]["gapP99Ms"]
    level["passed"] = bool(
        level["lostFrames"] == 0 and level["failedStreams"] == 0 and gap is not None and gap < GAP_TARGET_MS
    )
    return level


async def sweep_paced(bench: Bench, levels: list[int]) -> tuple[list[dict[str, Any]], int]:
    """Paced levels in order until one fails or the direct path loses its pacing; the highest level sustained."""
    sweep = []
    for c in levels:
        level = await paced_level(bench, c)
        sweep.append(level)
        if not _sustains(level):
            break
    return sweep, sustained(sweep)


async def concurrency(bench: Bench, levels: list[int] | None = None, rss_streams: int = 1000) -> dict[str, Any]:
    """Highest concurrency of paced streams with no lost frame and added gap p99 < 10 ms; RSS per stream."""
    levels = levels or ([50, 200, 500, 1000] if bench.quick else [25, 50, 100, 200, 300, 500, 750, 1000])
    sweep, best = await sweep_paced(bench, levels)
    rss = await rss_per_stream(bench, rss_streams)
    return {
        "scenario": paced(),
        "throttleMs": 0,
        "gapTargetMs": GAP_TARGET_MS,
        "levels": sweep,
        "maxSustained": best,
        "rss": rss,
    }


async def rss_per_stream(bench: Bench, count: int) -> dict[str, Any]:
    """A fresh gateway; `count` slow streams held open together (4 deltas/s for ~10 s); RSS peak − idle."""
    await bench.restart_gateway(bench.database_url, bench.gw.workers, **bench.gw_env)
    n, delay = (24, 250) if bench.quick else (40, 250)
    scenario = paced(n, delay)
    expected = expected_text(n, PACED_SIZE)
    out: dict[str, Any] = {"streams": count, "scenario": scenario}
    for path in (Path.DIRECT, Path.GATEWAY):
        server = bench.sim if path is Path.DIRECT else bench.gw
        await asyncio.sleep(0.5)
        idle = server.rss()
        in_flight, at_peak = 0, 0
        sampler = procs.Sampler(server, 0.1)

        async def one(offset: float) -> StreamResult:
            nonlocal in_flight, at_peak
            await asyncio.sleep(offset)
            in_flight += 1
            try:
                return await stream(bench.target(path), scenario, bench._marker())
            finally:
                in_flight -= 1

        async def watch() -> None:
            nonlocal at_peak
            best = 0
            while True:
                await asyncio.sleep(0.1)
                rss = server.rss()
                if in_flight >= count * 0.98 and rss > best:
                    best, at_peak = rss, in_flight
                    out.setdefault(path.value, {})["rssAllOpen"] = rss

        with sampler:
            watcher = asyncio.create_task(watch())
            results = await asyncio.gather(*(one(bench.rng.uniform(0, 2.0)) for _ in range(count)))
            watcher.cancel()
        summary = _summarise(list(results), expected, PACED_SIZE)
        all_open = out.get(path.value, {}).get("rssAllOpen", sampler.peak)
        out[path.value] = {
            "idleRssMB": round(idle / 2**20, 1),
            "peakRssMB": round(sampler.peak / 2**20, 1),
            "rssAllOpenMB": round(all_open / 2**20, 1),
            "streamsOpenAtSample": at_peak,
            "kbPerStream": round((all_open - idle) / count / 1024, 1),
            "kbPerStreamPeak": round((sampler.peak - idle) / count / 1024, 1),
            "failed": summary["failed"],
            "lostFrames": summary["lostFrames"],
            "errors": summary["errors"],
        }
        await bench.forget()
    return out


# ---------------------------------------------------------------------- 4. slow reader


async def slow_reader(bench: Bench) -> dict[str, Any]:
    """A 1 KB/s reader on a 5 MB unpaced stream: RSS growth of the server it reads from, and how much of
    the stream the simulator managed to send (back-pressure must reach the upstream socket)."""
    seconds = 8.0 if bench.quick else 20.0
    n, size = 20000, 256
    scenario = paced(n, 0, size)
    out: dict[str, Any] = {"scenario": scenario, "streamBytes": n * size, "readRateBps": 1024, "seconds": seconds}
    for path in (Path.DIRECT, Path.GATEWAY):
        server = bench.sim if path is Path.DIRECT else bench.gw
        marker = bench._marker()
        await asyncio.sleep(0.5)
        idle = server.rss()
        with procs.Sampler(server, 0.1) as sampler:
            read = await slow_read(bench.target(path), scenario, marker, rate=1024, seconds=seconds)
            await asyncio.sleep(0.3)
        seen = (await bench.http.get(f"{bench.sim.url}/_sim/requests", params={"contains": marker})).json()
        frames = seen[-1]["framesSent"] if seen else None
        out[path.value] = {
            **read,
            "rssGrowthMB": round((sampler.peak - idle) / 2**20, 2),
            "idleRssMB": round(idle / 2**20, 1),
            "simulatorFramesSent": frames,
            "simulatorBytesSentApprox": None if frames is None else frames * (size + 90),
            "upstreamClosed": bool(seen and seen[-1]["clientClosed"]),
        }
        await bench.forget()
    return out


# ---------------------------------------------------------------------- 5. cancellation


async def cancel(bench: Bench) -> dict[str, Any]:
    """Client disconnect → simulator sees the upstream closed (its `closedAt`), over cancels at random points."""
    total = 60 if bench.quick else 200
    rounds = 2 if bench.quick else 4
    parallel = 10
    per_round = []
    for r in range(rounds):
        order = (Path.DIRECT, Path.GATEWAY) if r % 2 == 0 else (Path.GATEWAY, Path.DIRECT)
        entry = {}
        for path in order:
            entry[path.value] = await _cancel_batch(bench, path, total // rounds, parallel)
        per_round.append(entry)
        await bench.forget()
    summary = compare(per_round, ("p50Ms", "p99Ms"))
    gw_latencies = [x for r in per_round for x in r["gateway"]["latenciesMs"]]
    d_latencies = [x for r in per_round for x in r["direct"]["latenciesMs"]]
    for paths in per_round:
        for p in paths.values():
            p.pop("latenciesMs")
    return {
        "cancels": total,
        "scenario": paced(),
        "rounds": per_round,
        **summary,
        "gateway": {
            "p50Ms": _rounded(pct(gw_latencies, 50)),
            "p99Ms": _rounded(pct(gw_latencies, 99)),
            "missed": sum(r["gateway"]["missed"] for r in per_round),
        },
        "direct": {
            "p50Ms": _rounded(pct(d_latencies, 50)),
            "p99Ms": _rounded(pct(d_latencies, 99)),
            "missed": sum(r["direct"]["missed"] for r in per_round),
        },
    }


def _rounded(ms: float | None) -> float | None:
    """A latency to the microsecond; None (every cancel of the batch missed) stays None."""
    return None if ms is None else round(ms, 3)


async def _cancel_batch(bench: Bench, path: Path, count: int, parallel: int) -> dict[str, Any]:
    gate = asyncio.Semaphore(parallel)

    async def one() -> tuple[str, StreamResult]:
        marker = bench._marker()
        async with gate:
            k = bench.rng.randint(1, PACED_N - 1)
            return marker, await stream(bench.target(path), paced(), marker, cancel_after=k)

    done = await asyncio.gather(*(one() for _ in range(count)))
    latencies, missed = [], 0
    for marker, result in done:
        response = await bench.http.get(
            f"{bench.sim.url}/_sim/wait", params={"contains": marker, "until": "closed", "timeout": "5"}
        )
        entry = response.json() if response.status_code == 200 else None
        if entry is None or result.closed_wall is None or entry.get("closedAt") is None:
            missed += 1
            continue
        latencies.append((entry["closedAt"] - result.closed_wall) * 1000)
    return {
        "cancels": count,
        "missed": missed,
        "latenciesMs": latencies,
        "p50Ms": _rounded(pct(latencies, 50)),
        "p99Ms": _rounded(pct(latencies, 99)),
    }


# ---------------------------------------------------------------------- 6. ledger on


async def ledger(bench: Bench, baseline_max: int | None = None) -> dict[str, Any]:
    """Scenarios 1 and 3 again with the request ledger writing to SQLite and to PostgreSQL."""
    backends = {"sqlite": f"sqlite:///{bench.gw.workdir}/ledger-bench.db"}
    postgres = os.environ.get("BENCH_POSTGRES_URL") or await _postgres_url()
    if postgres:
        backends["postgresql"] = postgres
    out: dict[str, Any] = {"backends": {}}
    if "postgresql" not in backends:
        out["postgresql"] = "skipped: no PostgreSQL reachable (set BENCH_POSTGRES_URL)"
    top = baseline_max or 200
    levels = [max(top, 25)] if bench.quick else sorted({max(top, 25), max(top, 25) * 2})
    baseline_env = dict(bench.gw_env)
    for name, url in backends.items():
        await bench.restart_gateway(url)
        active = await _ledger_active(bench)
        entry: dict[str, Any] = {"databaseUrl": url.split("@")[-1], "ledgerActive": active}
        if not active:
            entry["note"] = "the gateway wrote no request record: ledger not present or not wired yet; figures skipped"
            out["backends"][name] = entry
            continue
        entry["ttft"] = await ttft(bench, [1, 50])
        sweep = [await paced_level(bench, c) for c in levels]
        entry["concurrency"] = {"levels": sweep, "maxSustained": sustained(sweep)}
        out["backends"][name] = entry
    await bench.restart_gateway(os.environ.get("BENCH_DATABASE_URL"), workers=1, **baseline_env)
    return out


async def _ledger_active(bench: Bench) -> bool:
    result = await stream(bench.target(Path.GATEWAY), paced(4, 1), bench._marker())
    if not result.request_id:
        return False
    for _ in range(20):  # the record is written when the turn settles, possibly just after the last frame
        response = await bench.http.get(f"{bench.gw.url}/v1/requests/{result.request_id}")
        if response.status_code == 200:
            return True
        await asyncio.sleep(0.1)
    return False


async def _postgres_url() -> str | None:
    """The local PostgreSQL (trust auth on loopback), with a database of the bench's own."""
    try:
        import asyncpg
    except ImportError:
        return None
    try:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres", timeout=3)
    except Exception:
        return None
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = 'gateway_bench'")
        if not exists:
            await conn.execute("CREATE DATABASE gateway_bench")
        else:  # a fresh ledger each run
            await conn.close()
            conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/gateway_bench", timeout=3)
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await conn.close()
    return "postgresql://postgres@127.0.0.1:5432/gateway_bench"
