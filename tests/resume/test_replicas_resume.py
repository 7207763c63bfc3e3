"""Resumable streams across two gateway processes sharing a Redis (their own redis-server) and a ledger:
disconnect from replica A, resume on replica B with Last-Event-ID and get exactly the rest (no gap, no
duplicate, one terminal) while the upstream was called once; nobody resumes → upstream closed after the grace
window and the record says aborted; another key → 404; Redis restarted → a clear 410, never a silent gap;
Redis down → resumable streams still stream on their own replica, nothing hangs; resumptions are streams:
they count against the key's concurrency and the replica's stream limits, and hold no Redis connection each."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Iterator

import httpx
import pytest

from tests.conformance import check_frames, parse_sse
from tests.conftest import marker, turn
from tests.redisproc import two_replicas
from tests.resume_client import holding_resumptions, read_some, resume
from tests.policy.test_keys_policy import bearer, digest

KEYS = "alpha:sk-replica-alpha-01,beta:sk-replica-beta-02"
ALPHA = {"Authorization": "Bearer sk-replica-alpha-01"}
BETA = {"Authorization": "Bearer sk-replica-beta-02"}
SLOW = "anthropic/slow;n=200;delay_ms=10"


@pytest.fixture(scope="module")
def pair(sim, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("resume")
    env = {"GATEWAY_API_KEYS": KEYS, "GATEWAY_RESUME_GRACE": "2", "GATEWAY_REDIS_TIMEOUT": "0.5"}
    with two_replicas(sim.url, tmp, env) as replicas:
        yield replicas


def resumable(model: str, prompt: str) -> dict[str, Any]:
    body = turn(model, prompt)
    body["options"]["resumable"] = True
    return body


def record(url: str, request_id: str, until) -> dict[str, Any]:
    """The request's record once `until(record)` holds (the ledger is written after the turn settles)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/v1/requests/{request_id}", headers=ALPHA, timeout=10)
        if response.status_code == 200 and until(response.json()):
            return response.json()
        time.sleep(0.1)  # polling another process's ledger writes
    raise AssertionError(f"record of {request_id} never reached the expected state")


def test_disconnect_on_a_resume_on_b(pair, sim):
    a, b = pair["a"], pair["b"]
    prompt = marker()
    request_id, head = read_some(a.url, resumable(SLOW, prompt), ALPHA, 50)
    rest = resume(b.url, request_id, ALPHA, head[-1].id)
    assert rest.status_code == 200
    tail = parse_sse(rest.text)
    assert tail[0].id == "51"
    events = check_frames(head + tail)  # ids 1 … N without gap or duplicate, one terminal, every invariant
    assert [e["type"] for e in events].count("done") == 1 and events[-1]["type"] == "done"
    text = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert text == events[-1]["message"]["content"][0]["text"]
    assert len(sim.seen(prompt)) == 1  # one upstream call for the whole stream
    settled = record(b.url, request_id, lambda r: r["outcome"] == "done" and r["resumed"] == 1)
    assert settled["clientDisconnected"] is False

    # What an EventSource does on reconnect without an id: the whole stream again, from the event store.
    again = resume(b.url, request_id, ALPHA, None)
    assert [json.loads(f.data) for f in parse_sse(again.text)] == events
    assert "gateway_resumptions_total 2.0" in httpx.get(f"{b.url}/metrics").text
    assert resume(b.url, request_id, ALPHA, str(len(events))).status_code == 204  # nothing after the terminal


def test_nobody_resumes_upstream_closed_after_grace(pair, sim):
    a = pair["a"]
    prompt = marker()
    request_id, _ = read_some(a.url, resumable("anthropic/slow;n=3000;delay_ms=10", prompt), ALPHA, 5)
    started = time.monotonic()
    sim.wait(prompt, until="closed", timeout=30)
    assert time.monotonic() - started >= 1.5  # not before the grace window (2 s) ran out
    settled = record(a.url, request_id, lambda r: r["outcome"] is not None)
    assert settled["outcome"] == "aborted" and settled["clientDisconnected"] is True and settled["resumed"] == 0


def test_another_key_gets_404_on_any_replica(pair):
    a, b = pair["a"], pair["b"]
    request_id, head = read_some(a.url, resumable(SLOW, marker()), ALPHA, 3)
    for proc in (a, b):
        refused = resume(proc.url, request_id, BETA, "3")
        assert refused.status_code == 404 and refused.json()["error"]["type"] == "not_found"
    assert resume(b.url, "req_unknown0000", ALPHA, None).status_code == 404
    plain = httpx.post(f"{a.url}/v1/stream", json=turn("anthropic/text"), headers=ALPHA, timeout=30)
    assert plain.status_code == 200
    plain_id = plain.headers["x-request-id"]
    record(a.url, plain_id, lambda r: r["outcome"] == "done" and r["resumable"] is False)
    assert resume(b.url, plain_id, ALPHA, None).status_code == 404  # it never asked to be resumable
    events = check_frames(head + parse_sse(resume(b.url, request_id, ALPHA, "3").text))
    assert events[-1]["type"] == "done"


def test_events_lost_with_redis_say_so(pair):
    a, b, redis_server = pair["a"], pair["b"], pair["redis"]
    request_id, _ = read_some(a.url, resumable("anthropic/slow;n=3000;delay_ms=10", marker()), ALPHA, 5)
    redis_server.restart_empty()
    lost = resume(b.url, request_id, ALPHA, "5")
    assert lost.status_code == 410
    error = lost.json()["error"]
    assert error["type"] == "resume_unavailable" and request_id in error["message"]
    # The replica running the turn still has every event: resuming there continues without a gap.
    with httpx.Client(timeout=30) as client:
        with client.stream("GET", f"{a.url}/v1/stream/{request_id}", headers={**ALPHA, "Last-Event-ID": "5"}) as r:
            assert r.status_code == 200
            text = ""
            for chunk in r.iter_text():
                text += chunk
                if text.count("\n\n") >= 3:
                    break
    frames = [f for f in parse_sse(text[: text.rfind("\n\n") + 2]) if f.id is not None]
    assert frames[0].id == "6"


def test_redis_down_resumable_stream_still_streams(pair):
    a, redis_server = pair["a"], pair["redis"]
    redis_server.stop()
    try:
        started = time.monotonic()
        response = httpx.post(
            f"{a.url}/v1/stream", json=resumable("anthropic/slow;n=20;delay_ms=5", marker()), headers=ALPHA, timeout=30
        )
        assert response.status_code == 200
        events = check_frames(parse_sse(response.text))
        assert events[-1]["type"] == "done"
        assert time.monotonic() - started < 15
        # Resuming on the other replica needs the event store: a clear 503 once its retries give up (about 5 s).
        unavailable = resume(pair["b"].url, response.headers["x-request-id"], ALPHA, "1")
        assert unavailable.status_code == 503 and unavailable.json()["error"]["type"] == "event_store_unavailable"
    finally:
        redis_server.start()


def _kept_in_redis(redis_server, request_id: str) -> list[int]:
    """The sizes of the frames Redis keeps for a request (the replicas' prefix is the default `gw`)."""
    entries = redis_server.client().xrange(f"gw:resume:{request_id}:events")
    return [len(fields["d"].encode()) for _, fields in entries]


def test_redis_keeps_what_the_origin_keeps_within_the_byte_bounds(sim, tmp_path):
    """GATEWAY_RESUME_MAX_TURN_BYTES and GATEWAY_RESUME_MAX_BYTES hold in Redis too: a ~22 KB turn keeps its
    newest 8 KB there (resuming before them on the other replica: 410); past the replica's 16 KB the turns
    that finished first are dropped from Redis as well (410 on the other replica), the latest stay whole."""
    env = {"GATEWAY_API_KEYS": KEYS, "GATEWAY_RESUME_MAX_TURN_BYTES": "8192", "GATEWAY_RESUME_MAX_BYTES": "16384"}
    with two_replicas(sim.url, tmp_path, env) as replicas:
        a, b, redis_server = replicas["a"], replicas["b"], replicas["redis"]
        big = httpx.post(f"{a.url}/v1/stream", json=resumable(SLOW, marker()), headers=ALPHA, timeout=60)
        big_id, big_frames = big.headers["x-request-id"], parse_sse(big.text)
        assert big.status_code == 200 and len(big.text.encode()) > 20_000
        sizes = _kept_in_redis(redis_server, big_id)
        assert 0 < sum(sizes) <= 8192 and len(sizes) < len(big_frames)
        first = len(big_frames) - len(sizes) + 1  # the first event Redis keeps
        lost = resume(b.url, big_id, ALPHA, str(first - 2))
        assert lost.status_code == 410 and lost.json()["error"]["type"] == "resume_unavailable"
        assert parse_sse(resume(b.url, big_id, ALPHA, str(first - 1)).text) == big_frames[first - 1 :]

        small = []
        for _ in range(3):
            result = httpx.post(
                f"{a.url}/v1/stream",
                json=resumable("anthropic/slow;n=50;delay_ms=1", marker()),
                headers=ALPHA,
                timeout=60,
            )
            assert result.status_code == 200 and 5000 < len(result.text.encode()) < 8000
            small.append((result.headers["x-request-id"], parse_sse(result.text)))
        dropped = [big_id, small[0][0]]
        deadline = time.monotonic() + 10
        while any(_kept_in_redis(redis_server, request_id) for request_id in dropped):  # dropped off the turn's path
            assert time.monotonic() < deadline, "the dropped turns' events are still in Redis"
            time.sleep(0.05)
        for request_id in dropped:
            lost = resume(b.url, request_id, ALPHA, None)
            assert lost.status_code == 410 and lost.json()["error"]["type"] == "resume_unavailable"
        for request_id, frames in small[1:]:
            assert parse_sse(resume(b.url, request_id, ALPHA, None).text) == frames


LONG = "anthropic/slow;n=600;delay_ms=100"  # a turn that runs for a minute, while the resumptions are open


def test_resumptions_count_against_the_keys_concurrency_and_the_stream_limits(sim, tmp_path):
    """A key with 2 concurrent streams opens 20 resumptions of its running turn on the other replica: 2 stream
    (the turn itself does not count against its own resumptions), 18 get 429 concurrency_limit, and while they
    are open the key starts no turn; closed, their leases are released. GATEWAY_MAX_STREAMS_PER_KEY 3 and
    GATEWAY_MAX_STREAMS 5 hold for resumptions too (429 too_many_streams)."""
    keys = [
        {"name": name, "sha256": digest(f"sk-{name}"), **policy}
        for name, policy in {"capped": {"concurrent_streams": 2}, "plain": {}, "other": {}}.items()
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    env = {
        "GATEWAY_KEYS_FILE": str(tmp_path / "keys.json"),
        "GATEWAY_MAX_STREAMS_PER_KEY": "3",
        "GATEWAY_MAX_STREAMS": "5",
        "GATEWAY_RESUME_GRACE": "30",
    }
    with two_replicas(sim.url, tmp_path, env) as replicas:
        a, b, redis = replicas["a"], replicas["b"], replicas["redis"].client()
        capped_id, _ = read_some(a.url, resumable(LONG, marker()), bearer("sk-capped"), 3)

        async def while_capped_reads(answers: list[str]) -> None:
            assert answers.count("200") == 2 and answers.count("concurrency_limit") == 18, answers
            refused = httpx.post(
                f"{a.url}/v1/stream", json=turn("anthropic/text"), headers=bearer("sk-capped"), timeout=30
            )
            assert refused.status_code == 429 and refused.json()["error"]["type"] == "concurrency_limit"

        asyncio.run(holding_resumptions(b.url, capped_id, bearer("sk-capped"), 20, while_capped_reads))
        deadline = time.monotonic() + 20
        while redis.zcard("gw:conc:capped") != 1:  # the turn's own lease is left
            assert time.monotonic() < deadline, "the resumptions' leases were never released"
            time.sleep(0.05)

        plain_id, _ = read_some(a.url, resumable(LONG, marker()), bearer("sk-plain"), 3)
        other_id, _ = read_some(a.url, resumable(LONG, marker()), bearer("sk-other"), 3)

        async def while_plain_reads(answers: list[str]) -> None:
            assert answers.count("200") == 3 and answers.count("too_many_streams") == 17, answers

            async def while_other_reads(others: list[str]) -> None:
                assert others.count("200") == 2 and others.count("too_many_streams") == 18, others

            await holding_resumptions(b.url, other_id, bearer("sk-other"), 20, while_other_reads)

        asyncio.run(holding_resumptions(b.url, plain_id, bearer("sk-plain"), 20, while_plain_reads))


def test_many_resumptions_hold_no_redis_connection_each_and_leave_other_tenants_resumable(pair):
    """One key holds 100 resumptions open on B of its turn running on A: they share B's Redis connections (the
    test's Redis sees far fewer than 100 clients), and meanwhile another key's resumable turns are mirrored
    and resumed across the replicas in both directions, whole."""
    a, b = pair["a"], pair["b"]
    hog_id, _ = read_some(a.url, resumable(LONG, marker()), ALPHA, 3)

    async def while_held(answers: list[str]) -> None:
        assert answers == ["200"] * 100
        clients = pair["redis"].client().client_list()
        assert len(clients) < 50, f"{len(clients)} Redis connections for 100 resumptions"
        for origin, other in ((b, a), (a, b)):
            request_id, head = await asyncio.to_thread(read_some, origin.url, resumable(SLOW, marker()), BETA, 5)
            rest = await asyncio.to_thread(resume, other.url, request_id, BETA, "5")
            assert rest.status_code == 200
            events = check_frames(head + parse_sse(rest.text))
            assert events[-1]["type"] == "done"

    asyncio.run(holding_resumptions(b.url, hog_id, ALPHA, 100, while_held))
