"""`python -m bench.stored_document [items]` — how long writing a stored response's document holds the event loop.

In one process, a conversation of `items` (default 320,000) small message items is serialised as the stored
responses' document twice while a heartbeat task wakes every millisecond, and the longest gap between its
wake-ups is printed: `before`, in one `orjson.dumps` on the event loop; `after`, as the gateway writes it
(`app.api.stored_responses.document_of`, a slice of items per orjson call, in a worker thread: `off_loop`).
The machine is shared: the figures move with its load; run it a few times.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Awaitable, Callable

import orjson

from app.api.body import off_loop
from app.api.stored_responses import document_of
from app.doors.base import StoredResponse


async def longest_gap(work: Callable[[], Awaitable[str]]) -> tuple[float, int]:
    """(the longest gap between a 1 ms heartbeat's wake-ups while `work` runs, the document's length)."""
    gaps: list[float] = []
    done = False

    async def beat() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    heartbeat = asyncio.create_task(beat())
    await asyncio.sleep(0.01)
    document = await work()
    done = True
    await heartbeat
    return max(gaps), len(document)


async def main(count: int) -> None:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}
    response = StoredResponse(response={"id": "resp_bench"}, items=[dict(item) for _ in range(count)])

    async def on_loop() -> str:
        return orjson.dumps({"response": response.response, "items": response.items}).decode()

    before = await longest_gap(on_loop)
    after = await longest_gap(lambda: off_loop(1 << 62, lambda: document_of(response)))
    print(f"before: one orjson.dumps on the loop, longest loop gap {before[0]:.3f}s ({before[1]} bytes)")
    print(f"after: document_of in a worker thread, longest loop gap {after[0]:.3f}s ({after[1]} bytes)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 320_000))
