"""An SSE client for resumption tests: read part of a stream, disconnect, continue with Last-Event-ID."""

from __future__ import annotations

from typing import Any

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
