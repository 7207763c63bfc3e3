"""`python -m bench [scenario …] [--quick] [--concurrency N …]` — see bench/README.md.

With no scenario it runs every scenario of SCENARIOS and writes bench/results/latest.json, summary.md and latest.png. A run of
chosen scenarios writes bench/results/partial.{json,md,png} instead (or `--out NAME`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import sys
import time
from typing import Any

import uvloop

from bench import coldstart, history, peer_bench, pools, procs, report, scenarios as sc, workers

SCENARIOS = (
    "coldstart",
    "ttft",
    "cpu",
    "cpu-apis",
    "doors",
    "agent-doors",
    "turns",
    "concurrency",
    "slow-reader",
    "cancel",
    "ledger",
    "workers",
    "pools",
    "peers",
)
EXTRA = ("rss", "idle")  # single scenarios, not part of a full run (`rss` is in `concurrency`)
KEYS = {"coldstart": "coldStart", "slow-reader": "slowReader", "cpu-apis": "cpuApis", "agent-doors": "agentDoors"}


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "scenarios", nargs="*", metavar="scenario", help=f"any of {', '.join(SCENARIOS)} (default: all)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter windows (about 5 minutes)")
    parser.add_argument(
        "--concurrency",
        type=int,
        action="append",
        help="levels for ttft / turns / concurrency (repeatable), e.g. --concurrency 50",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out", help="results name under bench/results/ (default: latest for a full run, else partial)"
    )
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS + EXTRA]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS + EXTRA)}")
    return args


async def _run(args: argparse.Namespace, out: str) -> dict[str, Any]:
    """Runs the chosen scenarios, writing the figures so far under the results name `out` after each."""
    chosen = args.scenarios or list(SCENARIOS)
    started = time.monotonic()
    committed = history.committed_results()  # read before this run overwrites latest.json
    results: dict[str, Any] = {
        "meta": {
            "startedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "quick": args.quick,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "scenarios": chosen,
            "seed": args.seed,
            "commit": history.commit(),
            "notes": [
                "TTFT and inter-frame gap are measured with coalescing off (throttleMs 0): every upstream delta is "
                "one frame on both paths. CPU is measured with coalescing at the default (50 ms) and off.",
                "The simulator paces every frame (message_start, block start, ping, deltas), so direct TTFT is "
                "about 3 × 20 ms; only the difference gateway − direct is the gateway's.",
            ],
        }
    }
    bench = await asyncio.to_thread(sc.Bench, sc.Config(quick=args.quick, seed=args.seed))
    try:
        await bench.warmup()
        results["meta"]["databaseUrl"] = bench.database_url or "gateway default"
        for name in chosen:
            t0 = time.monotonic()
            load0 = round(os.getloadavg()[0], 2)
            print(f"[bench] {name} …", file=sys.stderr, flush=True)
            if name == "coldstart":  # fresh processes of its own, beside the bench's
                value = await coldstart.cold_start(bench.sim, 3 if args.quick else 7)
            elif name == "ttft":
                value = await sc.ttft(bench, args.concurrency)
            elif name == "cpu":
                value = await sc.cpu(bench)
            elif name == "cpu-apis":
                value = await sc.cpu_apis(bench)
            elif name == "doors":
                value = await sc.doors(bench)
            elif name == "agent-doors":
                value = await sc.agent_doors(bench)
            elif name == "turns":
                value = await sc.turns(bench, args.concurrency)
            elif name == "rss":
                value = await sc.rss_per_stream(bench, 1000)
            elif name == "idle":
                value = await sc.idle(bench)
            elif name == "workers":  # its own canned upstream, load generator and gateways (bench/workers.py)
                value = await workers.run(args.quick)
            elif name == "pools":  # its own simulators and gateway (bench/pools.py)
                value = await pools.run(args.quick)
            elif name == "peers":  # its own simulator, gateway and Portkey, pinned (bench/peer_bench.py)
                value = await peer_bench.run(args.quick)
            elif name == "concurrency":
                value = await sc.concurrency(bench, args.concurrency)
            elif name == "slow-reader":
                value = await sc.slow_reader(bench)
            elif name == "cancel":
                value = await sc.cancel(bench)
            else:  # ledger
                top = results.get("concurrency", {}).get("maxSustained")
                value = await sc.ledger(bench, top)
            value["durationS"] = round(time.monotonic() - t0, 1)
            value["loadAverage1m"] = {"start": load0, "end": round(os.getloadavg()[0], 2)}
            results[KEYS.get(name, name)] = value
            results["history"] = history.beside(results, committed)
            report.write(dict(results), out)  # a run stopped half way still leaves its figures
            print(f"[bench] {name} done in {value['durationS']} s", file=sys.stderr, flush=True)
    finally:
        await bench.close()
    results["meta"]["durationS"] = round(time.monotonic() - started, 1)
    results["meta"]["finishedAt"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return results


def main(argv: list[str] | None = None) -> None:
    args = _args(sys.argv[1:] if argv is None else argv)
    procs.raise_fd_limit()
    name = args.out or ("latest" if not args.scenarios else "partial")
    results = uvloop.run(_run(args, name))
    paths = report.write(results, name)
    md = paths[1].read_text()
    print(md)
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)


if __name__ == "__main__":
    main()
