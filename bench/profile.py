"""`python -m bench.profile` — where the gateway's time goes on short turns (see bench/README.md).

Starts the simulator and a gateway whose process runs under cProfile (`python -m bench.profile serve`), plays
`--turns` short turns (5 unpaced deltas, ledger on as by default) from `--concurrency` clients, stops the
gateway (the profile is written when it exits) and prints the gateway CPU per turn and the top functions by
own time and by cumulative time. cProfile slows the process down (about 2×): compare figures of profiled
runs with each other only; `python -m bench turns` gives the unprofiled figure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from bench import procs
from bench.client import Path as Route, Target, stream
from bench.scenarios import PACED_SIZE, SHORT_N, paced


def serve(port: int, out: str) -> None:
    """Run the gateway (uvicorn, uvloop, httptools, one worker); cProfile runs from SIGUSR1 to SIGUSR2, which
    writes the stats to `out` (so that start-up and warm-up stay out of the profile)."""
    import uvicorn

    config = uvicorn.Config("app.main:app", host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                            log_level="warning", access_log=False, backlog=4096)
    profiler = cProfile.Profile()

    def stop(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    signal.signal(signal.SIGUSR2, stop)
    uvicorn.Server(config).run()


def report(stats_path: str, top: int) -> str:
    buf = io.StringIO()
    stats = pstats.Stats(stats_path, stream=buf)
    stats.strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


async def drive(port: int, turns: int, concurrency: int) -> tuple[int, int]:
    target = Target(Route.GATEWAY, port)
    scenario = paced(SHORT_N, 0, PACED_SIZE)
    left = turns
    failed = 0

    async def client() -> None:
        nonlocal left, failed
        while left > 0:
            left -= 1
            result = await stream(target, scenario, f"profile-{left}", throttle_ms=None)
            failed += not result.completed

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return turns, failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--out", help="write the text summary here too (e.g. bench/profiles/NAME.txt)")
    args = parser.parse_args(argv)
    sim = procs.simulator()
    stats_path = str(Path(tempfile.mkdtemp(prefix="bench-profile-")) / "gateway.prof")
    gateway = procs.Server("gateway", "app.main:app", health="/readyz")
    # The gateway's environment of procs.gateway(), served by `serve` under cProfile.
    settings = procs.gateway_env(sim)
    port = procs.free_port()
    gateway.start_command([sys.executable, "-m", "bench.profile", "serve", str(port), stats_path], port, settings)
    try:
        uvloop.run(drive(port, 200, 10))  # warm-up: imports, connections, first records
        assert gateway.popen is not None
        gateway.popen.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        cpu0, wall0 = gateway.cpu(), time.monotonic()
        turns, failed = uvloop.run(drive(port, args.turns, args.concurrency))
        cpu = gateway.cpu() - cpu0
        wall = time.monotonic() - wall0
        gateway.popen.send_signal(signal.SIGUSR2)
        for _ in range(100):
            time.sleep(0.2)
            if Path(stats_path).exists() and Path(stats_path).stat().st_size:
                time.sleep(0.5)
                break
    finally:
        gateway.stop()
        sim.stop()
    head = (f"# {turns} short turns (`{paced(SHORT_N, 0, PACED_SIZE)}`), concurrency {args.concurrency}, "
            f"{failed} failed, under cProfile: gateway CPU {cpu / turns * 1000:.3f} ms per turn, "
            f"{turns / wall:.0f} turns/s\n")
    text = head + report(stats_path, args.top)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), sys.argv[3])
    else:
        main()
