"""`python -m bench.tracing [--quick] [--base REV]` — what OpenTelemetry tracing costs a turn, in the same run.

Gateway processes on the same simulator:

- **off**: no `OTEL_*` variable (tracing off: the SDK is not imported);
- **on**: `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP sink of the bench's own (a loopback server in
  a process of its own that reads each export and answers 200), the SDK's defaults otherwise (batch processor, every
  span sampled): a SERVER span and a CLIENT span per turn, exported from the SDK's thread;
- **base** (with `--base REV`, e.g. `--base main`): the gateway's `app/` as of that git revision, tracing
  off, so that "off" can be compared with the code before tracing existed.

Rounds alternate the order. Each round runs a batch of short turns (`slow;n=5;delay_ms=0;size=8`, the short
turn of `python -m bench turns`) at concurrency 1 (sequential) and 20 on each gateway. Reported per concurrency: gateway CPU per turn (process CPU
seconds over the batch ÷ turns, median over rounds) for each gateway, and the time to first text delta p50/p99
differences (on − off, off − base). Results: bench/results/tracing.{json,md}. The machine is shared: compare
the gateways of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import tempfile
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path as FsPath
from statistics import median
from typing import Any

from bench import procs
from bench.client import Path, Target, stream
from bench.stats import ms, pct

RESULTS = FsPath(__file__).parent / "results"
ROOT = FsPath(__file__).resolve().parent.parent
SCENARIO = "slow;n=5;delay_ms=0;size=8"  # the short turn of `python -m bench turns`


class OtlpSink:
    """A loopback OTLP/HTTP endpoint in a process of its own (so that taking exports costs neither the gateway
    nor the load generator any CPU): it reads every export, counts it and answers 200."""

    def __init__(self) -> None:
        self.port = procs.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._exports = multiprocessing.Value("q", 0)
        self._bytes = multiprocessing.Value("q", 0)
        self.process = multiprocessing.Process(
            target=_serve_sink, args=(self.port, self._exports, self._bytes), daemon=True
        )
        self.process.start()

    @property
    def exports(self) -> int:
        return self._exports.value

    @property
    def bytes(self) -> int:
        return self._bytes.value

    def stop(self) -> None:
        self.process.terminate()
        self.process.join(10)


def _serve_sink(port: int, exports: Any, received: Any) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with exports.get_lock():
                exports.value += 1
                received.value += len(body)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def checkout(rev: str, directory: str) -> str:
    """The repository's `app/` (and its catalog) as of `rev`, extracted under `directory`; its PYTHONPATH."""
    archive = subprocess.run(["git", "archive", rev, "app"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", directory], input=archive, check=True)
    return directory


async def _batch(gateway: procs.Server, concurrency: int, per_worker: int) -> dict[str, Any]:
    target = Target(Path.GATEWAY, gateway.port)
    results = []

    async def worker() -> None:
        for _ in range(per_worker):
            results.append(await stream(target, SCENARIO, f"bench-{uuid.uuid4().hex[:16]}"))

    cpu0 = gateway.cpu()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    turns = len(results)
    ttfts = [r.ttft for r in results if r.ttft is not None]
    return {
        "turns": turns,
        "failed": sum(1 for r in results if r.status != 200 or not r.completed),
        "ttftP50Ms": ms(pct(ttfts, 50)),
        "ttftP99Ms": ms(pct(ttfts, 99)),
        "gatewayCpuMsPerTurn": round((gateway.cpu() - cpu0) * 1000 / turns, 3),
    }


async def run(quick: bool, base: str | None) -> dict[str, Any]:
    sink = OtlpSink()
    sim = procs.simulator()
    gateways: dict[str, procs.Server] = {}
    try:
        gateways["off"] = procs.gateway(sim)
        gateways["on"] = procs.gateway(sim, OTEL_EXPORTER_OTLP_ENDPOINT=sink.url)
        if base is not None:
            gateways["base"] = procs.gateway(sim, PYTHONPATH=checkout(base, tempfile.mkdtemp(prefix="bench-base-")))
        for gateway in gateways.values():  # warm up (imports, connection pools)
            await _batch(gateway, 5, 4)
        rounds = 3 if quick else 6
        # concurrency → turns per worker; at 1 a turn's CPU includes the idle process's own (timers, ledger)
        levels = {1: 100 if quick else 200, 20: 15 if quick else 30}
        out: dict[str, Any] = {
            "scenario": SCENARIO,
            "rounds": rounds,
            "base": base,
            "loadavgStart": os.getloadavg(),
            "levels": {},
        }
        names = list(gateways)
        for concurrency, per_worker in levels.items():
            per_round = []
            for r in range(rounds):
                order = names if r % 2 == 0 else names[::-1]
                per_round.append({name: await _batch(gateways[name], concurrency, per_worker) for name in order})
            row: dict[str, Any] = {"rounds": per_round}
            for name in names:
                row[f"cpuMsPerTurn_{name}"] = round(median(e[name]["gatewayCpuMsPerTurn"] for e in per_round), 3)
            for a, b in (("on", "off"), ("off", "base")):
                if a in names and b in names:
                    for p in ("P50", "P99"):
                        row[f"ttft{p}Ms_{a}_minus_{b}"] = round(
                            median(e[a][f"ttft{p}Ms"] - e[b][f"ttft{p}Ms"] for e in per_round), 3
                        )
            row["failed"] = sum(e[n]["failed"] for e in per_round for n in names)
            out["levels"][str(concurrency)] = row
        out["spanExports"], out["spanExportBytes"] = sink.exports, sink.bytes  # tracing really exported
        out["loadavgEnd"] = os.getloadavg()
        return out
    finally:
        for server in (*gateways.values(), sim):
            server.stop()
        sink.stop()


def _markdown(result: dict[str, Any]) -> str:
    names = ["base", "off", "on"] if result["base"] else ["off", "on"]
    lines = [
        "# OpenTelemetry tracing: gateway CPU per turn, on vs off (same run)",
        "",
        f"Scenario `{result['scenario']}`, {result['rounds']} rounds per level, order alternating"
        + (f"; base = `app/` at `{result['base']}`" if result["base"] else "")
        + f". Load average {result['loadavgStart']} → {result['loadavgEnd']}. "
        f"Exports received by the sink: {result['spanExports']} ({result['spanExportBytes']} bytes).",
        "",
        "| concurrency | "
        + " | ".join(f"CPU/turn {n}" for n in names)
        + " | TTFT p50 on − off | TTFT p99 on − off"
        + (" | TTFT p50 off − base" if result["base"] else "")
        + " | failed |",
        "|---|" + "---|" * (len(names) + 3 + (1 if result["base"] else 0)),
    ]
    for level, row in result["levels"].items():
        cells = [f"{row[f'cpuMsPerTurn_{n}']} ms" for n in names]
        cells += [f"{row['ttftP50Ms_on_minus_off']} ms", f"{row['ttftP99Ms_on_minus_off']} ms"]
        if result["base"]:
            cells.append(f"{row['ttftP50Ms_off_minus_base']} ms")
        lines.append(f"| {level} | " + " | ".join(cells) + f" | {row['failed']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--base", help="also run the gateway's app/ as of this git revision (tracing off)")
    args = parser.parse_args()
    result = asyncio.run(run(args.quick, args.base))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tracing.json").write_text(json.dumps(result, indent=2))
    (RESULTS / "tracing.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
