"""An SSE client for resumption tests: read part of a stream, disconnect, continue with Last-Event-ID."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

import httpx

from tests.conformance import Frame, parse_sse


def read_some(url: str, body: dict[str, Any], headers: dict[str, str], events: int) -> tuple[str, list[Frame]]:
    """POST a stream, read `events` events (whole frames), then disconnect. Returns (request id, frames)."""
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{url}/v1/stream", json=body, headers=headers) as response:
            assert response.status_code == 200, response.read()
            request_id = response.headers["x-request-id"]
            text = ""
            for chunk in response.iter_text():
                text += chunk
                complete = text[: text.rfind("\n\n") + 2] if "\n\n" in text else ""
                frames = [f for f in parse_sse(complete) if f.id is not None]
                if len(frames) >= events:
                    return request_id, frames[:events]
    raise AssertionError("the stream ended before enough events")


def resume(url: str, request_id: str, headers: dict[str, str], last_event_id: str | bytes | None) -> httpx.Response:
    """GET /v1/stream/{id} to the end (the whole body). `last_event_id` as bytes: sent as they are."""
    extra = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    return httpx.get(f"{url}/v1/stream/{request_id}", headers={**headers, **extra}, timeout=60)


async def holding_resumptions(
    url: str, request_id: str, headers: dict[str, str], count: int, then: Callable[[list[str]], Awaitable[Any]]
) -> Any:
    """Open `count` resumptions of `request_id` (after event 3) at once; run `then(answers)` once each has its
    answer (`"200"` when it streams and its first frames arrived, else the error type), while those that
    stream stay open; close them all after."""
    answers: list[str] = []
    all_answered, close = asyncio.Event(), asyncio.Event()

    async def one(client: httpx.AsyncClient) -> None:
        async with client.stream(
            "GET", f"{url}/v1/stream/{request_id}", headers={**headers, "Last-Event-ID": "3"}
        ) as r:
            chunks = r.aiter_bytes()  # referenced until closed (a collected iterator closes the response)
            if r.status_code == 200:
                await chunks.__anext__()  # it is reading
                answers.append("200")
            else:
                answers.append(json.loads(await r.aread())["error"]["type"])
            if len(answers) == count:
                all_answered.set()
            await close.wait()

    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        tasks = [asyncio.create_task(one(client)) for _ in range(count)]
        try:
            await asyncio.wait_for(all_answered.wait(), 60)
            return await then(answers)
        finally:
            close.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
