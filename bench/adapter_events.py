"""`python -m bench.adapter_events [--events N] [--profile]` — CPU per upstream event of each adapter alone.

In this process, against the simulator (another process): for the Anthropic and the Gemini adapter, one long
unpaced stream (`slow;n=N;delay_ms=0`) opened through the adapter, every raw event read and fed to its
translator; this process's CPU time (`time.process_time`) per 1,000 events, the median of three streams after one
warm-up stream. `--profile` adds cProfile's top functions of one more stream. No gateway, no HTTP server, no
ledger: the SDK, its transport, the SSE decoding and the translation (issue 42 item 4: the Gemini adapter
against the Anthropic one).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import time

import uvloop

from app.providers.base import Provider
from app.providers.config import ProviderConfig
from app.providers.registry import ADAPTERS
from bench import procs
from bench.sdk_turn import turn_args

BASES = {"anthropic-messages": "/anthropic", "google-generative-ai": "/google"}


async def _stream(provider: Provider, scenario: str, profile: cProfile.Profile | None) -> tuple[int, float]:
    model, context, options = turn_args(scenario, 1)
    translator = provider.translator(model)
    started = time.process_time()
    if profile is not None:
        profile.enable()
    upstream = await provider.open(model, context, options)
    events = 0
    try:
        async for wire in upstream:
            translator.feed(wire)
            events += 1
        translator.end()
    finally:
        await upstream.aclose()
        if profile is not None:
            profile.disable()
    return events, time.process_time() - started


async def run(events: int, profile: bool) -> None:
    sim = await asyncio.to_thread(procs.simulator)
    try:
        for api, base in BASES.items():
            provider = ADAPTERS[api](ProviderConfig(name="bench", api_key="bench-key", base_url=sim.url + base))
            scenario = f"slow;n={events};delay_ms=0;size=8"
            try:
                await _stream(provider, scenario, None)  # warm-up
                runs = [await _stream(provider, scenario, None) for _ in range(3)]
                per_1k = statistics.median(cpu / count * 1e6 for count, cpu in runs)
                print(f"{api}: {runs[0][0]} events, {per_1k:.1f} ms CPU per 1,000 events", flush=True)
                if profile:
                    prof = cProfile.Profile()
                    await _stream(provider, scenario, prof)
                    out = io.StringIO()
                    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
                    print(out.getvalue())
            finally:
                await provider.aclose()
    finally:
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.adapter_events", description=__doc__)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    uvloop.run(run(args.events, args.profile))


if __name__ == "__main__":
    main()
