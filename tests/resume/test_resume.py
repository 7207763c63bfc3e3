"""Resumable streams within one gateway (no Redis): continue after Last-Event-ID with no gap and no
duplicate, the upstream called once; nobody resumes → the upstream is closed after the grace window and the
turn settles aborted; only the key that made the request may resume; non-resumable streams unchanged."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.conformance import check_frames, parse_sse
from tests.conftest import marker, turn
from tests.resume_client import holding_resumptions, read_some, resume

KEYS = "alpha:sk-resume-alpha-01,beta:sk-resume-beta-02"
ALPHA = {"Authorization": "Bearer sk-resume-alpha-01"}
BETA = {"Authorization": "Bearer sk-resume-beta-02"}
SLOW = "anthropic/slow;n=200;delay_ms=10"


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(api_keys=KEYS, resume_grace=0.5)


def resumable(model: str, prompt: str, **options) -> dict:
    body = turn(model, prompt)
    body["options"].update(resumable=True, **options)
    return body


def test_disconnect_and_resume_gives_the_whole_stream_once(gw):
    prompt = marker()
    request_id, head = read_some(gw.url, resumable(SLOW, prompt), ALPHA, 40)
    assert [f.id for f in head] == [str(n) for n in range(1, 41)]
    rest = resume(gw.url, request_id, ALPHA, head[-1].id)
    assert rest.status_code == 200 and rest.headers["content-type"].startswith("text/event-stream")
    tail = parse_sse(rest.text)
    events = check_frames(head + tail)  # ids 1, 2, 3 … without gap or duplicate, every invariant, one terminal
    assert events[-1]["type"] == "done"
    text = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert text == events[-1]["message"]["content"][0]["text"]
    assert len(gw.sim.seen(prompt)) == 1  # the upstream was called once
    job = gw.job(request_id)
    assert job.turn.outcome == "done" and gw.state.resume.times_resumed(job) == 1 and not job.client_disconnected
    record = gw.http.get(f"/v1/requests/{request_id}", headers=ALPHA).json()
    assert record["resumed"] == 1 and record["resumable"] is True and record["outcome"] == "done"
    assert "gateway_resumptions_total 1.0" in gw.http.get("/metrics").text

    # A finished stream can be read again from the start (no Last-Event-ID) and after its last event.
    again = resume(gw.url, request_id, ALPHA, None)
    assert [json.loads(f.data) for f in parse_sse(again.text)] == events
    after_end = resume(gw.url, request_id, ALPHA, str(len(events)))
    assert after_end.status_code == 204  # an EventSource reconnecting after the terminal stops there


def test_nobody_resumes_upstream_closed_after_grace(gw):
    prompt = marker()
    request_id, _ = read_some(gw.url, resumable("anthropic/slow;n=2000;delay_ms=10", prompt), ALPHA, 5)
    gw.sim.wait(prompt, until="closed", timeout=20)
    job = gw.job(request_id)
    assert job.turn.outcome == "aborted" and job.client_disconnected and gw.state.resume.times_resumed(job) == 0
    # What it produced until then is still there, ending with the aborted terminal.
    rest = parse_sse(resume(gw.url, request_id, ALPHA, "5").text)
    assert json.loads(rest[-1].data)["reason"] == "aborted"


def test_only_the_same_key_resumes(gateway_factory):
    gw = gateway_factory(api_keys=KEYS, resume_grace=60)
    request_id, head = read_some(gw.url, resumable(SLOW, marker()), ALPHA, 3)
    assert resume(gw.url, request_id, BETA, "3").status_code == 404
    unknown = resume(gw.url, "req_doesnotexist", ALPHA, None)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"
    bad = resume(gw.url, request_id, ALPHA, "three")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "Last-Event-ID"
    # The key as the Anthropic SDKs send it (`x-api-key`) is the same key.
    events = check_frames(head + parse_sse(resume(gw.url, request_id, {"x-api-key": "sk-resume-alpha-01"}, "3").text))
    assert events[-1]["type"] == "done"


def test_a_stream_that_is_not_resumable_cannot_be_resumed(gw):
    result = gw.stream(turn("anthropic/text"), headers=ALPHA)
    assert result.status == 200
    assert resume(gw.url, result.headers["x-request-id"], ALPHA, "1").status_code == 404


def test_events_beyond_the_cap_are_refused_not_skipped(gateway_factory):
    small = gateway_factory(api_keys=KEYS, resume_grace=5, resume_max_events=20)
    request_id, _ = read_some(small.url, resumable(SLOW, marker()), ALPHA, 2)
    small.job(request_id)
    lost = resume(small.url, request_id, ALPHA, "2")
    assert lost.status_code == 410 and lost.json()["error"]["type"] == "resume_unavailable"
    kept = parse_sse(resume(small.url, request_id, ALPHA, str(small.job(request_id).turn.events_sent - 5)).text)
    assert len(kept) == 5 and json.loads(kept[-1].data)["type"] == "done"


def test_openai_chat_door_resumes_with_the_header(gw):
    """A door whose body has no `options`: `X-Gateway-Resumable: true`; its frames get `id:` lines."""
    import httpx
    import openai

    prompt = marker()
    body = {"model": SLOW, "stream": True, "messages": [{"role": "user", "content": prompt}]}
    headers = {**ALPHA, "X-Gateway-Resumable": "true"}
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{gw.url}/v1/chat/completions", json=body, headers=headers) as response:
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            text = ""
            for chunk in response.iter_text():
                text += chunk
                if text.count("\n\n") >= 30:
                    break
    head = [f for f in parse_sse(text[: text.rfind("\n\n") + 2]) if f.data]
    rest = resume(gw.url, request_id, ALPHA, head[-1].id)
    assert rest.status_code == 200
    frames = head + [f for f in parse_sse(rest.text) if f.data]
    ids = [int(f.id) for f in frames if f.id is not None]
    assert ids == sorted(set(ids))  # increasing, no duplicate
    assert frames[-1].data == "[DONE]"
    chunks = [json.loads(f.data) for f in frames[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "".join(f"{i:07d} " for i in range(200))
    assert len(gw.sim.seen(prompt)) == 1

    # The official SDK reads a resumable stream (frames with `id:` lines) like any other.
    sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-resume-alpha-01", max_retries=0)
    stream = sdk.chat.completions.create(
        model="anthropic/slow;n=5;delay_ms=1",
        messages=[{"role": "user", "content": marker()}],
        stream=True,
        extra_headers={"X-Gateway-Resumable": "true"},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "".join(
        f"{i:07d} " for i in range(5)
    )


def test_a_last_event_id_of_non_ascii_digits_is_a_400(gw):
    """`²` (latin-1 0xB2) passes str.isdigit but is no event id: the documented 400, never a 500."""
    request_id, _ = read_some(gw.url, resumable("anthropic/slow;n=5;delay_ms=1", marker()), ALPHA, 1)
    for raw in (b"\xb2", b"1\xb9", b"\xb3\xb3"):  # ², 1¹, ³³ as a client's latin-1 header bytes
        bad = resume(gw.url, request_id, ALPHA, raw)
        assert bad.status_code == 400, raw
        error = bad.json()["error"]
        assert error["type"] == "invalid_request" and error["param"] == "Last-Event-ID"


def test_a_turn_keeps_at_most_its_byte_bound_of_events(gateway_factory):
    """GATEWAY_RESUME_MAX_TURN_BYTES: a finished turn of ~22 KB of frames keeps its newest 4 KB; resuming
    before them is the documented 410, after them is served."""
    small = gateway_factory(api_keys=KEYS, resume_grace=5, resume_max_turn_bytes=4096)
    whole = small.stream(resumable(SLOW, marker()), headers=ALPHA)
    assert whole.status == 200 and len(whole.text.encode()) > 20_000
    request_id = whole.headers["x-request-id"]
    small.job(request_id)
    kept = small.state.resume.local[request_id]
    assert kept.bytes <= 4096 and small.state.resume.kept.bytes == kept.bytes
    first = kept.first_seq
    assert 1 < first < len(whole.frames)
    for before_the_kept in (None, "2", str(first - 2)):
        lost = resume(small.url, request_id, ALPHA, before_the_kept)
        assert lost.status_code == 410 and lost.json()["error"]["type"] == "resume_unavailable"
    tail = parse_sse(resume(small.url, request_id, ALPHA, str(first - 1)).text)
    assert tail == whole.frames[first - 1 :] and json.loads(tail[-1].data)["type"] == "done"


def test_the_replica_drops_the_earliest_finished_turns_past_its_byte_bound(gateway_factory):
    """GATEWAY_RESUME_MAX_BYTES: turns of ~6 KB each against 16 KB kept by the replica: the earliest finished
    turns are dropped (410, past their end still 204), the latest stay whole."""
    small = gateway_factory(api_keys=KEYS, resume_grace=5, resume_max_bytes=16384)
    turns = []
    for _ in range(4):
        result = small.stream(resumable("anthropic/slow;n=50;delay_ms=1", marker()), headers=ALPHA)
        assert result.status == 200 and 5000 < len(result.text.encode()) < 8000
        small.job(result.headers["x-request-id"])
        turns.append(result)
    hub = small.state.resume
    assert hub.kept.bytes <= 16384
    for dropped in turns[:2]:
        request_id = dropped.headers["x-request-id"]
        lost = resume(small.url, request_id, ALPHA, None)
        assert lost.status_code == 410 and lost.json()["error"]["type"] == "resume_unavailable"
        assert resume(small.url, request_id, ALPHA, str(len(dropped.frames))).status_code == 204
    for kept in turns[2:]:
        again = resume(small.url, kept.headers["x-request-id"], ALPHA, None)
        assert again.status_code == 200 and parse_sse(again.text) == kept.frames


def test_resumptions_count_against_max_streams_per_key(gateway_factory):
    """GATEWAY_MAX_STREAMS_PER_KEY 3, on the gateway running the turn: 3 of 10 resumptions of it stream (the
    turn does not count against its own resumptions), 7 get 429 too_many_streams; closed, they free their slots."""
    gw = gateway_factory(api_keys=KEYS, resume_grace=30, max_streams_per_key=3)
    request_id, _ = read_some(gw.url, resumable("anthropic/slow;n=150;delay_ms=100", marker()), ALPHA, 3)

    async def while_open(answers: list[str]) -> None:
        assert answers.count("200") == 3 and answers.count("too_many_streams") == 7, answers

    asyncio.run(holding_resumptions(gw.url, request_id, ALPHA, 10, while_open))
    deadline = time.monotonic() + 10
    while gw.state.streams_per_key["alpha"] != 1 or gw.state.resumptions:  # the turn is left
        assert time.monotonic() < deadline, "closed resumptions still hold their slots"
        time.sleep(0.02)


def test_a_resumable_pi_stream_has_one_id_line_per_frame(gw):
    """pi's frames are the unified ones, `id:` included: a resumable pi stream must not get a second `id:`."""
    import httpx

    body = {
        "model": {"id": "slow;n=5;delay_ms=1", "provider": "anthropic", "api": "anthropic-messages"},
        "context": {"messages": [{"role": "user", "content": marker()}]},
    }
    headers = {**ALPHA, "X-Gateway-Resumable": "true"}
    response = httpx.post(f"{gw.url}/api/stream", json=body, headers=headers, timeout=60)
    assert response.status_code == 200
    frames = [block for block in response.text.split("\n\n") if "data: " in block]
    assert frames and all(block.count("id: ") == 1 for block in frames), response.text[:400]
    ids = [int(line[4:]) for block in frames for line in block.splitlines() if line.startswith("id: ")]
    assert ids == list(range(1, len(frames) + 1))
