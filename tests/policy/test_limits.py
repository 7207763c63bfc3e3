"""Request limits: body size and JSON depth (413), concurrent streams globally and per key (429 + Retry-After),
and an admission whose request went away while the store answered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from app.policy.keys import ClientKeys, KeyPolicy
from app.policy.limits import Limits
from app.policy.memory_store import MemoryLimitStore
from app.policy.store import Periods, Verdict

from tests.conftest import marker, turn

KEYS = "alpha:sk-client-alpha-0001,beta:sk-client-beta-0002"
ALPHA = {"Authorization": "Bearer sk-client-alpha-0001"}
BETA = {"Authorization": "Bearer sk-client-beta-0002"}


@pytest.fixture(scope="module")
def small(gateway_factory):
    return gateway_factory(max_body_bytes=2000, max_json_depth=8)


def test_body_too_large(small):
    response = small.http.post("/v1/stream", json=turn("anthropic/text", "x" * 5000))
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"
    assert "2000 bytes" in response.json()["error"]["message"]
    assert response.headers["x-request-id"]


def test_body_too_large_without_content_length(small):
    body = httpx.Request("POST", "/", json=turn("anthropic/text", "x" * 5000)).content

    def chunks():
        yield body[:1000]
        yield body[1000:]

    response = small.http.post("/v1/stream", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"


def test_json_too_deep(small):
    deep: dict = {"leaf": 1}
    for _ in range(10):
        deep = {"nested": deep}
    body = turn("anthropic/text", options={"metadata": deep})
    response = small.http.post("/v1/stream", json=body)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_deep"
    pi = small.http.post(
        "/api/stream", json={"model": {"provider": "anthropic", "id": "text"}, "context": {"messages": [deep]}}
    )
    assert pi.status_code == 413 and isinstance(pi.json()["error"], str)


def test_body_within_limits_is_served(small):
    result = small.stream(turn("anthropic/text", "short"))
    assert result.status == 200 and result.terminal["type"] == "done"


def _open_streams(gw, count: int, headers: dict[str, str]) -> tuple[httpx.Client, list]:
    """Start `count` slow streams and wait until each has its first event (so each turn is running)."""
    client = httpx.Client(base_url=gw.url, timeout=30)
    opened = []
    for _ in range(count):
        cm = client.stream(
            "POST", "/v1/stream", json=turn("anthropic/slow;n=2000;delay_ms=20", marker()), headers=headers
        )
        response = cm.__enter__()
        assert response.status_code == 200
        lines = response.iter_lines()  # kept referenced: a collected iterator would close the response
        while not next(lines).startswith("data:"):
            pass
        opened.append((cm, response.headers["x-request-id"], lines))
    return client, opened


def _close(gw, client, opened) -> None:
    for cm, request_id, _ in opened:
        cm.__exit__(None, None, None)
        assert gw.job(request_id).turn.outcome == "aborted"
    client.close()


def test_per_key_stream_limit(gateway_factory):
    gw = gateway_factory(api_keys=KEYS, max_streams_per_key=2, max_streams=10)
    client, opened = _open_streams(gw, 2, ALPHA)
    try:
        refused = gw.http.post("/v1/stream", json=turn("anthropic/text"), headers=ALPHA)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        error = refused.json()["error"]
        assert error["type"] == "too_many_streams" and "alpha" in error["message"] and "limit 2" in error["message"]
        pi = gw.http.post(
            "/api/stream",
            json={
                "model": {"provider": "anthropic", "id": "text"},
                "context": {"messages": [{"role": "user", "content": "hi"}]},
            },
            headers=ALPHA,
        )
        assert pi.status_code == 429 and "limit 2" in pi.json()["error"] and pi.headers["retry-after"] == "1"
        # Another key still has room.
        other = gw.stream(turn("anthropic/text"), headers=BETA)
        assert other.status == 200 and other.terminal["type"] == "done"
    finally:
        _close(gw, client, opened)
    # Once the streams ended the key may stream again.
    again = gw.stream(turn("anthropic/text"), headers=ALPHA)
    assert again.status == 200 and again.terminal["type"] == "done"
    metrics = gw.http.get("/metrics").text
    assert 'gateway_rejected_requests_total{kind="max_streams_per_key"} 2.0' in metrics


def test_global_stream_limit(gateway_factory):
    gw = gateway_factory(api_keys=KEYS, max_streams=2, max_streams_per_key=10)
    client, opened = _open_streams(gw, 2, ALPHA)
    try:
        for headers in (ALPHA, BETA):
            refused = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=headers)
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["message"] == "too many concurrent streams on this gateway (limit 2)"
    finally:
        _close(gw, client, opened)


class DroppingLimitStore(MemoryLimitStore):
    """A limit store whose `admit` drops a cancellation that arrives as it answers, as redis-py's socket writes
    do on Python 3.11 (`app.redis_client.raise_dropped_cancellation`)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def admit(self, *args: Any, **kwargs: Any) -> Verdict:
        self.asked.set()
        try:
            await self.answer
        except asyncio.CancelledError:
            pass
        return await super().admit(*args, **kwargs)


async def _no_spend(key_id: str, since_ms: int) -> float:
    return 0.0


async def test_a_request_cancelled_as_its_admission_drops_the_cancellation_ends_and_takes_nothing():
    keys = ClientKeys([], None)
    keys.policy = lambda key_id: KeyPolicy(requests_per_minute=1, concurrent_streams=1)  # type: ignore[method-assign]
    store = DroppingLimitStore()
    limits = Limits(keys, store, _no_spend)
    request = asyncio.create_task(limits.admit("team", ["fake/m"], "req_gone"))
    await store.asked.wait()
    store.answer.set_result(None)  # the store answers, and in the same step of the loop the client leaves
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request  # before: the admission returned and the handler went on to start a turn for nobody
    await limits.idle()
    assert "req_gone" not in limits.leases
    policy = keys.policy("team")
    verdict = await MemoryLimitStore.admit(store, "team", policy, "req_next", Periods.at(time.time()), 30_000)
    assert verdict.kind is None, "the abandoned admission left neither its rpm entry nor its hold"
