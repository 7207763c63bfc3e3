"""A large valid request does not stall the other streams: while the gateway reads, parses, validates and
converts a 120,000-message conversation, another stream's events keep flowing (issue 11, defect 12)."""

from __future__ import annotations

import threading
import time

import httpx
import orjson
import pytest

from tests.conftest import marker, turn
from tests.procs import free_port

MESSAGES = 120_000


def big_conversation(m: str, model: str = "anthropic/text") -> bytes:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(MESSAGES)]
    messages = [
        {"role": "user", "content": x["content"]}
        if x["role"] == "user"
        else {"role": "assistant", "content": [{"type": "text", "text": x["content"]}]}
        for x in messages
    ]
    messages.append({"role": "user", "content": m})
    return orjson.dumps({"model": model, "context": {"messages": messages}})


@pytest.mark.parametrize("vendor", ["anthropic", "google"])
def test_a_huge_conversation_does_not_stall_other_streams(gateway_factory, vendor):
    # The vendor points at a closed port: the big turn is read, parsed, validated and converted by its request
    # builder (for Gemini, also by the google-genai SDK's own conversion), then fails to connect, all inside
    # the gateway. The other stream runs on the simulator.
    gw = gateway_factory(
        **{f"{vendor}_base_url": f"http://127.0.0.1:{free_port()}/{vendor}"}, retries=0, max_body_bytes=16 * 1024 * 1024
    )
    big = big_conversation(marker(), f"{vendor}/text")
    arrivals: list[float] = []
    first = threading.Event()
    big_done = threading.Event()

    def other_stream() -> None:
        # Long enough to outlast the big request on a loaded machine; it stops at its first event after it.
        body = turn("openai/slow;n=10000;delay_ms=5", marker(), options={"throttleMs": 0})
        with httpx.Client(base_url=gw.server.url, timeout=120) as client:
            with client.stream("POST", "/v1/stream", json=body) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        arrivals.append(time.monotonic())
                        first.set()
                        if big_done.is_set():
                            return

    reader = threading.Thread(target=other_stream)
    reader.start()
    assert first.wait(30)
    started = time.monotonic()
    response = httpx.post(
        f"{gw.server.url}/v1/complete", content=big, headers={"content-type": "application/json"}, timeout=120
    )
    ended = time.monotonic()
    big_done.set()
    reader.join(120)
    assert response.status_code == 502, response.text[:300]  # the upstream was unreachable, as arranged
    assert arrivals[-1] > ended, "the other stream ended before the big request did: make it longer"
    # Progress, not speed: the other stream's events kept arriving while the big request was handled. Its
    # longest silence is a small part of that time (single C calls remain: the JSON parse, the collector's
    # catching up); reading, parsing, validating or converting the whole conversation at once on the event
    # loop made it most of that time.
    inside = [t for t in arrivals if started <= t <= ended]
    silences = [later - earlier for earlier, later in zip([started, *inside], [*inside, ended])]
    assert max(silences) < (ended - started) / 2, (
        f"the other stream was silent for {max(silences):.2f}s of the big request's {ended - started:.2f}s"
    )
