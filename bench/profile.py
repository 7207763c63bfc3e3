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
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import uvloop

from bench import procs
from bench.client import Path as Route, Target, stream
from bench.scenarios import PACED_SIZE, SHORT_N, paced


def serve_traced(port: int, out: str, frames: int = 1) -> None:
    """Run the gateway with tracemalloc: SIGUSR1 takes the baseline snapshot, SIGUSR2 writes the allocations
    made since then and still held (grouped by line) to `out`. With `frames` > 1 tracing starts at the baseline
    (tracing the start-up that deep is too slow) and the largest allocation tracebacks follow the lines."""
    import tracemalloc

    import uvicorn

    config = uvicorn.Config(
        "app.main:app",
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        backlog=4096,
    )
    if frames == 1:
        tracemalloc.start(1)
    baseline: list[tracemalloc.Snapshot] = []

    def held(*_: object) -> None:
        import gc

        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        diff = snapshot.compare_to(baseline[0], "lineno")
        lines = [
            f"total held since baseline: {sum(d.size_diff for d in diff)} B in {sum(d.count_diff for d in diff)} blocks"
        ]
        lines += [str(d) for d in diff[:60]]
        if frames > 1:
            lines.append(f"\nlargest tracebacks ({frames} frames, innermost first):")
            for d in snapshot.compare_to(baseline[0], "traceback")[:40]:
                lines.append(f"{d.size_diff} B in {d.count_diff} blocks")
                lines += [f"    {frame.filename}:{frame.lineno}" for frame in d.traceback]
        Path(out).write_text("\n".join(lines) + "\n")

    def start(*_: object) -> None:
        import gc

        gc.collect()
        if frames > 1:
            tracemalloc.start(frames)
        baseline.append(tracemalloc.take_snapshot())

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, held)
    uvicorn.Server(config).run()


def serve(port: int, out: str, timer: str = "wall") -> None:
    """Run the gateway (uvicorn, uvloop, httptools, one worker); cProfile runs from SIGUSR1 to SIGUSR2, which
    writes the stats to `out` (so that start-up and warm-up stay out of the profile). `timer` "thread": the
    event loop thread's CPU time (`time.thread_time`) instead of wall time, so that a socket write waiting for
    the GIL (the ledger's thread holds it) or a preempted process counts nothing."""
    import uvicorn

    config = uvicorn.Config(
        "app.main:app",
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        backlog=4096,
    )
    profiler = cProfile.Profile(time.thread_time) if timer == "thread" else cProfile.Profile()

    def stop(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    signal.signal(signal.SIGUSR2, stop)
    uvicorn.Server(config).run()


# Where a function's own time is counted, by the first of these fragments its file path holds (in order).
LAYERS = (
    ("edge, admission, routes (app/api, app/gateway, app/policy)", ("/app/api/", "/app/gateway", "/app/policy/")),
    ("dispatcher, job, watchdog (app/core)", ("/app/core/",)),
    ("adapters: request building, translation (app/providers, app/seams)", ("/app/providers/", "/app/seams/")),
    ("turn: message builder, event queue (app/stream)", ("/app/stream/",)),
    ("door encoding (app/doors)", ("/app/doors/",)),
    ("ledger (app/ledger, aiosqlite, sqlite3)", ("/app/ledger/", "aiosqlite", "sqlite3")),
    ("metrics, logs (app/telemetry, prometheus_client, logging)", ("/app/telemetry/", "prometheus_client", "logging")),
    ("rest of app/", ("/app/",)),
    ("uvicorn + httptools (HTTP server)", ("/uvicorn/", "httptools")),
    ("SDK: anthropic / openai (request building, SSE decoding)", ("/anthropic/", "/openai/")),
    ("SDK: google-genai", ("/google/",)),
    ("httpx2 + httpcore2 + h11 (the SDK's HTTP client)", ("/httpx2/", "/httpcore2/", "/h11/", "/httpx/")),
    ("aiohttp (transport)", ("/aiohttp/", "/multidict/", "/yarl/")),
    ("FastAPI / Starlette / pydantic", ("/fastapi/", "/starlette/", "/pydantic")),
    ("json (stdlib)", ("/json/",)),
    ("asyncio, uvloop, threading, ...", ("asyncio", "uvloop", "threading", "queue.py", "selectors", "socket")),
)


def layers(stats_path: str, units: int, unit: str) -> str:
    """Own time (cProfile's tottime) summed by layer (`LAYERS`), per `unit` (`units` of them in the run), and
    each layer's share. Built-in functions (`{method ...}`) count to no file: they are listed apart."""
    stats = pstats.Stats(stats_path)
    totals: dict[str, float] = {}
    for (path, _line, _name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if path == "~":
            layer = "built-in functions and methods (C), called from every layer"
        else:
            layer = next((label for label, parts in LAYERS if any(p in path for p in parts)), "other Python")
        totals[layer] = totals.get(layer, 0.0) + tottime
    whole = sum(totals.values())
    lines = [f"own time by layer (cProfile; µs per {unit}, share of the profiled time):"]
    for layer, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"  {seconds / units * 1e6:9.1f} µs  {seconds / whole:6.1%}  {layer}")
    lines.append(f"  {whole / units * 1e6:9.1f} µs  100.0%  all (profiled)")
    return "\n".join(lines) + "\n\n"


def report(stats_path: str, top: int) -> str:
    buf = io.StringIO()
    stats = pstats.Stats(stats_path, stream=buf)
    stats.strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


async def drive(
    port: int,
    turns: int,
    concurrency: int,
    pause: float = 0.0,
    deltas: int = SHORT_N,
    throttle_ms: int | None = None,
    provider: str = "anthropic",
) -> tuple[int, int]:
    """`turns` turns of `deltas` unpaced text deltas (short turns by default) over `concurrency` clients, each
    idle for `pause` seconds after each of its turns; `throttle_ms` is the request's coalescing window (None:
    the server's default; 0: one event per upstream delta); `provider` names the built-in vendor the model ref
    names (anthropic, openai, google: the simulator speaks each one's wire)."""
    target = Target(Route.GATEWAY, port, provider=provider)
    scenario = paced(deltas, 0, PACED_SIZE)
    left = turns
    failed = 0

    async def client() -> None:
        nonlocal left, failed
        while left > 0:
            left -= 1
            result = await stream(target, scenario, f"profile-{left}", throttle_ms=throttle_ms)
            failed += not result.completed
            if pause:
                await asyncio.sleep(pause)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return turns, failed


async def hold(gateway: procs.Server, port: int, count: int, out: str) -> str:
    """Open `count` slow streams (40 deltas 250 ms apart); with all of them open, the heap they hold."""
    assert gateway.popen is not None
    await drive(port, 50, 10)
    gateway.popen.send_signal(signal.SIGUSR1)
    await asyncio.sleep(1.0)
    target = Target(Route.GATEWAY, port)
    opened = asyncio.Event()
    started = 0

    async def one(i: int) -> None:
        nonlocal started
        await asyncio.sleep(i * 0.002)
        started += 1
        if started == count:
            opened.set()
        await stream(target, paced(40, 250, PACED_SIZE), f"hold-{i}")

    streams = [asyncio.ensure_future(one(i)) for i in range(count)]
    await opened.wait()
    await asyncio.sleep(3.0)  # every stream past its first frames
    async with httpx.AsyncClient(timeout=30) as http:
        metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    live = sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith("gateway_active_streams")
    )
    rss0 = gateway.rss()
    gateway.popen.send_signal(signal.SIGUSR2)
    for _ in range(100):
        await asyncio.sleep(0.2)
        if Path(out).exists() and Path(out).stat().st_size:
            await asyncio.sleep(0.3)
            break
    await asyncio.gather(*streams)
    text = Path(out).read_text()
    total = int(text.split("total held since baseline: ")[1].split(" B")[0])
    live = live or count
    return (
        f"# {live:.0f} slow streams (`{paced(40, 250, PACED_SIZE)}`) open (gateway_active_streams); Python heap held "
        f"since the idle baseline: {total / live / 1024:.1f} KB per stream (tracemalloc, by line); "
        f"gateway RSS {rss0 / 2**20:.0f} MB\n" + text
    )


def instructions(
    sim: procs.Server, turns: int, concurrency: int, deltas: int, throttle_ms: int | None, provider: str = "anthropic"
) -> str:
    """The gateway (plain uvicorn, as `procs.gateway`) under callgrind, counting instructions only while
    `turns` short turns run after a warm-up: a figure that load from other processes does not change."""
    work = Path(tempfile.mkdtemp(prefix="bench-callgrind-"))
    port = procs.free_port()
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={work}/callgrind.out",
        sys.executable,
        "-m",
        "uvicorn",
        "app.main:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    env = {**os.environ, "PYTHONPATH": str(procs.ROOT), **procs.gateway_env(sim)}
    server = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=open(work / "stderr.log", "wb"))
    try:
        deadline = time.monotonic() + 900  # everything runs about 50 times slower under valgrind
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the gateway under callgrind did not start: {(work / 'stderr.log').read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        uvloop.run(drive(port, 100, 10))  # warm-up
        control = ["callgrind_control", "-i"]
        subprocess.run([*control, "on", str(server.pid)], check=True, capture_output=True)
        turns, failed = uvloop.run(
            drive(port, turns, concurrency, deltas=deltas, throttle_ms=throttle_ms, provider=provider)
        )
        subprocess.run([*control, "off", str(server.pid)], check=True, capture_output=True)
    finally:
        server.terminate()
        server.wait(120)
    total = max(
        int(line.split()[1])
        for out in work.glob("callgrind.out*")
        for line in out.read_text().splitlines()
        if line.startswith(("summary:", "totals:"))
    )
    per_event = f", {total / (turns * (deltas + 6)) / 1e3:.1f} k per upstream event" if deltas != SHORT_N else ""
    return (
        f"# {turns} turns to {provider} (`{paced(deltas, 0, PACED_SIZE)}`, throttleMs {throttle_ms}), concurrency {concurrency}, "
        f"{failed} failed, under callgrind: {total / turns / 1e6:.3f} M instructions per turn{per_event} ({work})\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument(
        "--memory",
        type=int,
        metavar="N",
        help="instead: hold N slow streams open and report the heap they hold (tracemalloc)",
    )
    parser.add_argument(
        "--frames",
        type=int,
        default=1,
        help="with --memory: tracemalloc's traceback depth; above 1 the largest tracebacks are listed too",
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="instead: instructions per turn of the gateway under valgrind's callgrind (needs valgrind)",
    )
    parser.add_argument("--deltas", type=int, default=SHORT_N, help="text deltas per turn (default: a short turn's 5)")
    parser.add_argument(
        "--throttle-ms",
        type=int,
        default=None,
        help="the turns' coalescing window (default: the server's; 0: one event per upstream delta)",
    )
    parser.add_argument(
        "--provider", default="anthropic", help="the vendor the turns go to: anthropic (default), openai, google"
    )
    parser.add_argument(
        "--timer",
        choices=("wall", "thread"),
        default="wall",
        help="cProfile's clock: wall time (default) or the event loop thread's CPU time",
    )
    parser.add_argument("--out", help="write the text summary here too (e.g. bench/profiles/NAME.txt)")
    args = parser.parse_args(argv)
    sim = procs.simulator()
    stats_path = str(Path(tempfile.mkdtemp(prefix="bench-profile-")) / "gateway.prof")
    gateway = procs.Server("gateway", "app.main:app", health="/readyz")
    # The gateway's environment of procs.gateway(), served by `serve` under cProfile.
    settings = procs.gateway_env(sim)
    port = procs.free_port()
    if args.callgrind:
        try:
            text = instructions(sim, args.turns, args.concurrency, args.deltas, args.throttle_ms, args.provider)
        finally:
            sim.stop()
        print(text)
        return
    if args.memory:
        gateway.start_command(
            [sys.executable, "-m", "bench.profile", "serve-traced", str(port), stats_path, str(args.frames)],
            port,
            settings,
        )
        try:
            text = uvloop.run(hold(gateway, port, args.memory, stats_path))
        finally:
            gateway.stop()
            sim.stop()
        if args.out:
            Path(args.out).write_text(text)
        print(text)
        return
    gateway.start_command(
        [sys.executable, "-m", "bench.profile", "serve", str(port), stats_path, args.timer], port, settings
    )
    try:
        uvloop.run(drive(port, 200, 10))  # warm-up: imports, connections, first records
        assert gateway.popen is not None
        gateway.popen.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        cpu0, wall0 = gateway.cpu(), time.monotonic()
        turns, failed = uvloop.run(
            drive(
                port,
                args.turns,
                args.concurrency,
                deltas=args.deltas,
                throttle_ms=args.throttle_ms,
                provider=args.provider,
            )
        )
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
    head = (
        f"# {turns} turns (`{paced(args.deltas, 0, PACED_SIZE)}`, throttleMs {args.throttle_ms}), concurrency "
        f"{args.concurrency}, {failed} failed, under cProfile ({args.timer} clock): gateway CPU {cpu / turns * 1000:.3f} ms per turn, "
        f"{turns / wall:.0f} turns/s\n"
    )
    events = turns * (args.deltas + 6)  # a `slow;n=N` stream is N text deltas and 6 other events
    text = (
        head
        + layers(stats_path, turns, "turn")
        + layers(stats_path, events, "upstream event")
        + report(stats_path, args.top)
    )
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "wall")
    elif sys.argv[1:2] == ["serve-traced"]:
        serve_traced(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    else:
        main()
