"""`python -m bench.loadgen URL --concurrency C --seconds S [--warmup W] [--per-connection N]` — a cheap load
generator for the `workers` scenario: C raw asyncio connections (uvloop), each posting the same short turn to
`URL/v1/stream` back to back, a new connection every N turns (0: never), so that the kernel spreads
connections over the gateway's worker processes. Turns completed in the S seconds after a W-second warm-up are
counted. Prints `window start` and `window end` as the counting window opens and closes (the caller samples
the servers' CPU then), and last one JSON line: `{"turns", "failed", "seconds", "cpuS"}` (`cpuS`: this
process's user + system CPU over the window)."""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from urllib.parse import urlsplit

import uvloop

_END = b"\r\n0\r\n\r\n"  # the last chunk of a chunked response
_DONE = b"event: done"


def request_bytes(host: str, port: int, model: str) -> bytes:
    body = json.dumps(
        {"model": model, "context": {"messages": [{"role": "user", "content": "hello"}]}, "options": {"throttleMs": 0}}
    ).encode()
    head = (
        f"POST /v1/stream HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


class Turns(asyncio.Protocol):
    """One connection: `turn()` sends the request and resolves with the whole response once its last chunk came."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.buffer.endswith(_END) and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(bytes(self.buffer))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("closed"))

    async def turn(self, request: bytes) -> bytes:
        self.buffer.clear()
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(url: str, concurrency: int, seconds: float, warmup: float, per_connection: int, model: str) -> dict:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = request_bytes(host, port, model)
    loop = asyncio.get_running_loop()
    counting = False
    turns = failed = 0
    stop = False

    async def client() -> None:
        nonlocal turns, failed
        while not stop:
            transport, protocol = await loop.create_connection(Turns, host, port)
            try:
                done_here = 0
                while not stop and (per_connection == 0 or done_here < per_connection):
                    response = await protocol.turn(request)
                    done_here += 1
                    if counting:
                        if response.startswith(b"HTTP/1.1 200") and _DONE in response:
                            turns += 1
                        else:
                            failed += 1
            finally:
                transport.close()

    tasks = [asyncio.create_task(client()) for _ in range(concurrency)]
    await asyncio.sleep(warmup)
    print("window start", flush=True)
    counting = True
    cpu0, t0 = cpu_now(), time.monotonic()
    await asyncio.sleep(seconds)
    counting = False
    elapsed, cpu = time.monotonic() - t0, cpu_now() - cpu0
    print("window end", flush=True)
    stop = True
    await asyncio.wait(tasks, timeout=30)
    for task in tasks:
        task.cancel()
    return {"turns": turns, "failed": failed, "seconds": round(elapsed, 3), "cpuS": round(cpu, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__)
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--per-connection", type=int, default=0)
    parser.add_argument("--model", default="anthropic/claude-haiku-4-5")
    args = parser.parse_args()
    result = uvloop.run(run(args.url, args.concurrency, args.seconds, args.warmup, args.per_connection, args.model))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
