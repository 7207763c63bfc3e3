"""`python -m bench.timeline` — where a turn's time goes before its first byte reaches the client.

Starts the simulator and a gateway (`python -m bench.timeline serve`) whose process records a timestamp
(`time.perf_counter`) at named points of a turn's path: the request's bytes arriving, `Gateway.start_turn`,
the provider's `open()`, the body built, the SDK's `_build_request`, aiohttp's request, the upstream's first
bytes, the response's start and first body. It plays `--turns` short turns one at a time (so the points of
one turn never interleave with another's), and prints for each point the median time after the request's
bytes arrived. The points wrap library functions, so they add a few microseconds each; compare the gaps
between points, not the total with `python -m bench turns`.

`--pause-ms` leaves the gateway idle between turns, as between the turns of a client at concurrency 1 whose
streams last a while: the same turn's path then runs on caches other processes have used meanwhile.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import uvloop

from bench import procs
from bench.profile import drive

POINTS = [
    ("request bytes", "the client's request arrives (uvicorn's data_received)"),
    ("start_turn in", "the door decoded the request; Gateway.start_turn begins"),
    ("start_turn out", "limits, record admitted, the turn's task created"),
    ("open in", "the turn's task runs: the provider's open() begins"),
    ("body built", "the upstream request's JSON body is encoded"),
    ("sdk build in", "the SDK's _build_request begins"),
    ("sdk build out", "the SDK's httpx2 request is built"),
    ("aiohttp request", "aiohttp's ClientSession._request begins"),
    ("upstream send", "aiohttp writes the upstream request (ClientRequest.send)"),
    ("response start", "the client's response headers are written"),
    ("upstream bytes", "the upstream's first bytes arrive"),
    ("open out", "the SDK's stream is open (response headers parsed)"),
    ("first body", "the first event bytes are written to the client"),
]


class Marks:
    """Timestamps of named points, written to `out` as JSON on SIGUSR2."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.marks: list[tuple[str, float]] = []

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter()))

    def dump(self, *_: object) -> None:
        Path(self.out).write_text(json.dumps(self.marks))

    def wrap(self, owner: Any, attr: str, before: str | None = None, after: str | None = None) -> None:
        """Mark `before` when `owner.attr` is called and `after` when it returns (awaiting it if async)."""
        import inspect

        function: Callable[..., Any] = getattr(owner, attr)
        mark = self.mark
        if inspect.iscoroutinefunction(function):

            async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
                if before:
                    mark(before)
                result = await function(*args, **kwargs)
                if after:
                    mark(after)
                return result

            setattr(owner, attr, wrapped_async)
        else:

            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if before:
                    mark(before)
                result = function(*args, **kwargs)
                if after:
                    mark(after)
                return result

            setattr(owner, attr, wrapped)


def serve(port: int, out: str) -> None:
    """The gateway (uvicorn, uvloop, httptools, one worker) with the points of `POINTS` marked."""
    import aiohttp.client
    import aiohttp.client_proto
    import aiohttp.client_reqrep
    import anthropic._base_client
    import uvicorn
    from uvicorn.protocols.http import httptools_impl

    from app.gateway import Gateway
    from app.providers.stainless import StainlessProvider

    marks = Marks(out)
    mark = marks.mark
    marks.wrap(Gateway, "start_turn", "start_turn in", "start_turn out")
    marks.wrap(StainlessProvider, "open", "open in", "open out")
    marks.wrap(StainlessProvider, "encoded_body", after="body built")
    marks.wrap(anthropic._base_client.BaseClient, "_build_request", "sdk build in", "sdk build out")
    marks.wrap(aiohttp.client.ClientSession, "_request", "aiohttp request")
    marks.wrap(aiohttp.client_reqrep.ClientRequest, "send", "upstream send")
    marks.wrap(aiohttp.client_proto.ResponseHandler, "data_received", "upstream bytes")

    received = httptools_impl.HttpToolsProtocol.data_received

    def data_received(self: Any, data: bytes) -> None:
        if data.startswith(b"POST /v1/stream"):
            mark("request bytes")
        received(self, data)

    httptools_impl.HttpToolsProtocol.data_received = data_received  # type: ignore[method-assign]
    send = httptools_impl.RequestResponseCycle.send

    async def marked_send(self: Any, message: Any) -> None:
        if message["type"] == "http.response.start":
            mark("response start")
        elif message.get("body"):
            mark("first body")
        await send(self, message)

    httptools_impl.RequestResponseCycle.send = marked_send  # type: ignore[method-assign]
    signal.signal(signal.SIGUSR2, marks.dump)
    config = uvicorn.Config(
        "app.main:app",
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )
    uvicorn.Server(config).run()


def medians(marks: list[tuple[str, float]], skip: int) -> dict[str, tuple[float, int]]:
    """Per point, the median ms after its turn's request bytes (the first mark of each name per turn)."""
    turns: list[dict[str, float]] = []
    for name, at in marks:
        if name == "request bytes":
            turns.append({name: at})
        elif turns and name not in turns[-1]:
            turns[-1][name] = at
    turns = turns[skip:]
    result = {}
    for name, _ in POINTS:
        gaps = [(turn[name] - turn["request bytes"]) * 1000 for turn in turns if name in turn]
        if gaps:
            result[name] = (statistics.median(gaps), len(gaps))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.timeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="idle time after each turn (default 0)")
    parser.add_argument("--out", help="write the table here too (e.g. bench/profiles/NAME.txt)")
    args = parser.parse_args(argv)
    out = str(Path(tempfile.mkdtemp(prefix="bench-timeline-")) / "marks.json")
    sim = procs.simulator()
    gateway = procs.Server("gateway", "app.main:app", health="/readyz")
    port = procs.free_port()
    gateway.start_command(
        [sys.executable, "-m", "bench.timeline", "serve", str(port), out], port, procs.gateway_env(sim)
    )
    warmup = 50
    try:
        uvloop.run(drive(port, warmup, 1))
        turns, failed = uvloop.run(drive(port, args.turns, 1, args.pause_ms / 1000))
        assert gateway.popen is not None
        gateway.popen.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not Path(out).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        gateway.stop()
        sim.stop()
    rows = medians([tuple(m) for m in json.loads(Path(out).read_text())], skip=warmup)
    idle = f", {args.pause_ms:g} ms idle after each" if args.pause_ms else ""
    text = (
        f"# {turns} short turns one at a time (`slow;n=5;delay_ms=0;size=8`){idle}, {failed} failed: median ms "
        "after the request's bytes arrived\n\n| point | ms | turns | what |\n|---|---|---|---|\n"
    )
    text += "".join(
        f"| {name} | {rows[name][0]:.3f} | {rows[name][1]} | {what} |\n" for name, what in POINTS if name in rows
    )
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]), sys.argv[3])
    else:
        main()
