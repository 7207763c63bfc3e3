"""`python -m bench.sdk_turn` — the cost of one turn inside the provider/SDK layer alone (see bench/README.md).

Starts the simulator and, in this process, one provider (`--api`, default the Anthropic one) pointed at it,
then plays `--turns` short turns (`provider.open()`, every raw event read, the upstream closed) from
`--concurrency` tasks. No gateway, no HTTP server, no ledger: what is measured is the SDK request path, the
transport and the SSE decoding. Prints this process's CPU per turn (the simulator runs in another process);
`--profile` adds cProfile's top functions, `--memory N` instead holds N slow streams open after their first
event and reports the Python heap they hold per stream (tracemalloc, by line).

For repeatable figures under load run it under callgrind (instructions are counted only for the measured
turns, start-up and warm-up stay out):

    valgrind --tool=callgrind --instr-atstart=no .venv/bin/python -m bench.sdk_turn --turns 300 --callgrind
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import pstats
import subprocess
import time
import tracemalloc
from typing import Any

import uvloop

from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.config import ProviderConfig
from app.providers.registry import ADAPTERS
from bench import procs
from bench.scenarios import PACED_SIZE, SHORT_N, paced

BASES = {"anthropic-messages": "/anthropic", "openai-responses": "/openai/v1", "openai-completions": "/compat/v1"}


def provider(api: str, sim_url: str) -> Any:
    return ADAPTERS[api](ProviderConfig(name="bench", api_key="bench-key", base_url=sim_url + BASES[api]))


def turn_args(scenario: str, i: int) -> tuple[ModelInfo, Context, StreamOptions]:
    model = ModelInfo(provider="bench", id=scenario, pricing=Pricing())
    context = Context.model_validate({"messages": [{"role": "user", "content": f"sdk-turn-{i}"}]})
    return model, context, StreamOptions()


async def one_turn(p: Any, scenario: str, i: int) -> int:
    upstream = await p.open(*turn_args(scenario, i))
    events = 0
    try:
        async for _ in upstream:
            events += 1
    finally:
        await upstream.aclose()
    return events


async def turns(p: Any, count: int, concurrency: int, scenario: str) -> int:
    left = count
    events = 0

    async def client() -> None:
        nonlocal left, events
        while left > 0:
            left -= 1
            got = await one_turn(p, scenario, left)
            events += got

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return events


async def held(p: Any, count: int) -> str:
    """Open `count` slow streams (a delta every 5 s), read each one's first event, and report the heap they hold."""
    await turns(p, 20, 5, paced(SHORT_N, 0, PACED_SIZE))
    gc.collect()
    tracemalloc.start(1)
    baseline = tracemalloc.take_snapshot()
    upstreams = []
    iterators = []
    for i in range(count):
        upstream = await p.open(*turn_args(paced(40, 5000, PACED_SIZE), i))
        it = upstream.__aiter__()
        await it.__anext__()
        upstreams.append(upstream)
        iterators.append(it)
    gc.collect()
    diff = tracemalloc.take_snapshot().compare_to(baseline, "lineno")
    tracemalloc.stop()
    total = sum(d.size_diff for d in diff)
    for upstream in upstreams:
        await upstream.aclose()
    lines = [
        f"# {count} open upstream streams (after their first event): {total / count:.0f} B of Python heap "
        f"per stream (tracemalloc, by line)"
    ]
    lines += [str(d) for d in diff[:80]]
    return "\n".join(lines)


def callgrind(on: bool) -> None:
    subprocess.run(
        ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], check=False, stdout=subprocess.DEVNULL
    )


async def run(args: argparse.Namespace, sim_url: str) -> str:
    p = provider(args.api, sim_url)
    try:
        if args.memory:
            return await held(p, args.memory)
        scenario = paced(SHORT_N, 0, PACED_SIZE)
        await turns(p, 100, args.concurrency, scenario)  # warm-up: imports, connections
        profiler = cProfile.Profile() if args.profile else None
        gc.collect()
        if args.callgrind:
            callgrind(True)
        if profiler:
            profiler.enable()
        cpu0 = time.process_time()
        events = await turns(p, args.turns, args.concurrency, scenario)
        cpu = time.process_time() - cpu0
        if profiler:
            profiler.disable()
        if args.callgrind:
            callgrind(False)
        text = (
            f"# {args.api}: {args.turns} turns (`{scenario}`, {events // args.turns} raw events each), "
            f"concurrency {args.concurrency}: {cpu / args.turns * 1e6:.0f} µs CPU per turn"
            f"{' under cProfile' if profiler else ''}\n"
        )
        if profiler:
            buf = io.StringIO()
            stats = pstats.Stats(profiler, stream=buf).strip_dirs()
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
            text += buf.getvalue()
        return text
    finally:
        await p.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sdk_turn", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--api", default="anthropic-messages", choices=sorted(BASES))
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="cProfile the measured turns")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--callgrind", action="store_true", help="switch callgrind's instrumentation on for the measured turns"
    )
    parser.add_argument("--memory", type=int, metavar="N", help="instead: the heap held per open stream, N streams")
    parser.add_argument("--out", help="write the text summary here too")
    args = parser.parse_args(argv)
    sim = procs.simulator()
    try:
        text = uvloop.run(run(args, sim.url))
    finally:
        sim.stop()
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
