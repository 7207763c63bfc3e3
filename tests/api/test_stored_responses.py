"""A body that builds on stored responses (`previous_response_id`, `item_reference`) is admitted before any stored
response is read (`app.api.stored_responses.decode`, `Gateway.admit_ahead`): a key its limits refuse costs no
read, and a continuation whose stored state is slow to read already holds its slot of the key's limits, so the
key is refused meanwhile instead of running past them. Over loopback with the official `openai` SDK; the
ledger's `load_response` is held by the test to make the read slow."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from app.api import stored_responses
from app.api.body import OFF_LOOP_BYTES
from app.doors.base import StoredResponse
from tests.conftest import marker

KEY = "sk-team"


def _keys_file(tmp_path: Path, **policy: Any) -> str:
    path = tmp_path / "keys.json"
    path.write_text(
        json.dumps({"keys": [{"name": "team", "sha256": hashlib.sha256(KEY.encode()).hexdigest(), **policy}]})
    )
    return str(path)


def _client(gw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=10)


class HeldReads:
    """Replaces the gateway's `ledger.load_response` with one that records each read and waits until `release`."""

    def __init__(self, gw: Any) -> None:
        self.gw = gw
        self.reads: list[str] = []
        self.gate: asyncio.Event = gw.server.call(self._event())
        ledger = gw.state.ledger
        original = ledger.load_response

        async def held(response_id: str, key_id: str | None, since_ms: int) -> str | None:
            self.reads.append(response_id)
            await self.gate.wait()
            return await original(response_id, key_id, since_ms)

        ledger.load_response = held

    @staticmethod
    async def _event() -> asyncio.Event:
        return asyncio.Event()

    def until_reading(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while len(self.reads) < count:
            assert time.monotonic() < deadline, f"{count} stored reads never started ({self.reads})"
            time.sleep(0.01)

    def release(self) -> None:
        async def opened() -> None:
            self.gate.set()

        self.gw.server.call(opened())


def test_a_key_at_its_concurrency_is_refused_while_its_continuation_reads_stored_state(gateway_factory, tmp_path):
    gw = gateway_factory(keys_file=_keys_file(tmp_path, concurrent_streams=1), throttle_ms=0)
    client = _client(gw)
    first = client.responses.create(model="anthropic/text", input=f"hello {marker()}")
    reads = HeldReads(gw)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        continuation = pool.submit(
            client.responses.create, model="anthropic/text", previous_response_id=first.id, input="and then?"
        )
        reads.until_reading(1)
        # The continuation holds the key's one slot while its stored state is read: a new turn is refused.
        with pytest.raises(openai.RateLimitError) as refused:
            client.responses.create(model="anthropic/text", input=f"meanwhile {marker()}")
        assert refused.value.body["code"] == "concurrency_limit"  # type: ignore[index]
        # So is another continuation, before anything of it is read.
        with pytest.raises(openai.RateLimitError):
            client.responses.create(model="anthropic/text", previous_response_id=first.id, input="me too")
        assert reads.reads == [first.id], "a refused continuation reads nothing"
        reads.release()
        assert continuation.result().status == "completed"


def test_a_continuation_its_keys_limits_refuse_reads_no_stored_state(gateway_factory, tmp_path):
    gw = gateway_factory(keys_file=_keys_file(tmp_path, requests_per_minute=1), throttle_ms=0)
    client = _client(gw)
    first = client.responses.create(model="anthropic/text", input=f"hello {marker()}")
    reads = HeldReads(gw)
    reads.release()
    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model="anthropic/text", previous_response_id=first.id, input="again")
    assert refused.value.body["code"] == "rate_limit_rpm"  # type: ignore[index]
    assert reads.reads == []


def test_a_continuation_that_does_not_start_gives_its_admission_back(gateway_factory, tmp_path):
    """A continuation admitted ahead of its read and then refused (its stored response is not there) frees its
    slot of the key's concurrency at once: the next turn is served."""
    gw = gateway_factory(keys_file=_keys_file(tmp_path, concurrent_streams=1), throttle_ms=0)
    client = _client(gw)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="anthropic/text", previous_response_id="resp_nothing_here", input="hi")
    gw.server.call(gw.state.limits.idle())
    assert client.responses.create(model="anthropic/text", input=f"next {marker()}").status == "completed"
    assert gw.state.pending == 0 and not gw.state.streams_per_key


def test_a_continuation_past_the_conversation_bound_is_a_413_naming_size_and_setting(gateway_factory):
    gw = gateway_factory(responses_max_bytes=4000, throttle_ms=0)
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=10)
    first = client.responses.create(model="anthropic/text", input=f"{marker()} " + "long words " * 100)
    m = marker()
    with pytest.raises(openai.APIStatusError) as refused:
        client.responses.create(model="anthropic/text", previous_response_id=first.id, input=f"{m} " + "x" * 3000)
    assert refused.value.status_code == 413
    error = refused.value.body
    assert error["code"] == "conversation_too_large" and error["param"] == "previous_response_id"  # type: ignore[index]
    message = error["message"]  # type: ignore[index]
    assert "GATEWAY_RESPONSES_MAX_BYTES" in message and "limit of 4000 bytes" in message
    size = int(message.split(" come to ")[1].split(" bytes")[0])
    assert size > 4000
    assert gw.sim.seen(m) == [], "nothing reached the vendor"
    # A shorter continuation of the same response still fits.
    assert client.responses.create(model="anthropic/text", previous_response_id=first.id, input="ok?").status


def test_a_keys_stored_responses_are_bounded_by_responses_max_per_key(gateway_factory):
    gw = gateway_factory(api_keys="mine:sk-mine,theirs:sk-theirs", responses_max_per_key=2, throttle_ms=0)
    mine = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-mine", max_retries=0, timeout=10)
    theirs = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-theirs", max_retries=0, timeout=10)
    other = theirs.responses.create(model="anthropic/text", input=f"theirs {marker()}")
    kept = [mine.responses.create(model="anthropic/text", input=f"mine {marker()}") for _ in range(3)]
    with pytest.raises(openai.NotFoundError):
        mine.responses.retrieve(kept[0].id)  # the key's oldest, beyond its newest two
    assert [mine.responses.retrieve(r.id).id for r in kept[1:]] == [r.id for r in kept[1:]]
    assert theirs.responses.retrieve(other.id).id == other.id, "another key's are its own"


class ThreadOfDumps:
    """Stands for `orjson` in `app.api.stored_responses` (the gateway runs in this process): records the thread
    of each `dumps`, which only writing a stored document calls there."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def dumps(self, value: Any, *args: Any, **kwargs: Any) -> bytes:
        self.threads.append(threading.get_ident())
        return orjson.dumps(value, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)


async def _loop_thread() -> int:
    return threading.get_ident()


def test_a_large_conversation_is_serialised_for_storage_off_the_event_loop(gateway_factory, monkeypatch):
    """Keeping a response serialises its whole conversation. Before: in one `orjson.dumps` on the event loop,
    which held every other request (and their admissions' Redis deadline) for as long as it took; now a
    conversation of `OFF_LOOP_BYTES` or more is serialised in a worker thread, a slice of items per call, and
    a small one at once on the loop (no thread hop)."""
    gw = gateway_factory(throttle_ms=0)
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=10)
    recorded = ThreadOfDumps()
    monkeypatch.setattr(stored_responses, "orjson", recorded)
    loop_thread = gw.server.call(_loop_thread())

    small = client.responses.create(model="anthropic/text", input=f"small {marker()}")
    assert recorded.threads and set(recorded.threads) == {loop_thread}
    recorded.threads.clear()

    words = "long words " * (OFF_LOOP_BYTES // 10)
    large = client.responses.create(model="anthropic/text", previous_response_id=small.id, input=f"{marker()} {words}")
    assert recorded.threads, "the large response was kept"
    assert loop_thread not in recorded.threads, "its conversation was serialised on the event loop"
    kept = client.responses.input_items.list(large.id, order="asc")
    assert words.strip() in json.dumps(kept.model_dump()), "the document written is the whole conversation"


def test_a_stored_document_is_the_same_json_whatever_its_slices():
    per_slice = stored_responses.SLICE_ITEMS
    for count in (0, 1, per_slice, per_slice + 1, 2 * per_slice + 7):
        response = StoredResponse(
            response={"id": "resp_1", "output": [{"n": -1}]}, items=[{"n": n, "text": "é"} for n in range(count)]
        )
        whole = orjson.dumps({"response": response.response, "items": response.items}).decode()
        assert stored_responses.document_of(response) == whole
