"""Each timeout fires against a simulator scenario and settles the turn with an error that names it."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import marker, turn


@pytest.fixture(scope="module")
def quick(gateway_factory):
    return gateway_factory(first_event_timeout=0.5, idle_timeout=0.5, retries=0, keepalive_interval=0.2)


def test_first_event_timeout(quick):
    m = marker()
    result = quick.stream(turn("anthropic/hang-before-headers", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == "anthropic/hang-before-headers first-event timeout fired after 0.5s"
    assert quick.sim.wait(m, until="closed")["clientClosed"] is True  # the upstream was hung up on


def test_idle_timeout_mid_stream(quick):
    m = marker()
    result = quick.stream(turn("anthropic/hang-mid-stream", m))
    assert result.types()[0] == "start" and "text_delta" in result.types()
    assert result.terminal["reason"] == "error"
    assert result.terminal["errorMessage"] == "anthropic/hang-mid-stream idle timeout fired after 0.5s"
    assert result.message["content"][0]["text"]  # the partial text is kept
    assert ": ping" in result.text  # keep-alives went out while the upstream was silent
    assert quick.sim.wait(m, until="closed")["clientClosed"] is True


def test_total_timeout(gateway_factory):
    gw = gateway_factory(total_timeout=1.0, retries=0)
    m = marker()
    result = gw.stream(turn("anthropic/slow;n=1000;delay_ms=20", m))
    assert result.terminal["reason"] == "error"
    assert result.terminal["errorMessage"] == "anthropic/slow;n=1000;delay_ms=20 total timeout fired after 1s"
    assert gw.sim.wait(m, until="closed")["completed"] is False


def test_a_hung_upstream_gets_the_client_its_error_at_the_first_content_deadline_with_retries_left(gateway_factory):
    """Issue 39 item 10: with three retries of a 0.6 s first-event timeout the client would wait 2.4 s; the
    turn's first-content deadline (1 s) ends it during its second attempt, as a 504-class timeout."""
    gw = gateway_factory(first_event_timeout=0.6, retries=3, retry_backoff_ms=1, first_content_deadline=1.0)
    m = marker()
    result = gw.stream(turn("anthropic/hang-before-headers", m))
    assert result.types() == ["error"]
    assert result.terminal["errorMessage"] == "anthropic/hang-before-headers first-content deadline fired after 1s"
    job = gw.job(result.headers["x-request-id"])
    assert [a.timeout for a in job.attempts] == ["first_event", "first_content"]
    assert job.settled.status == 504
    assert len(gw.sim.seen(m)) == 2


def test_connect_timeout(gateway_factory):
    # A listening socket whose accept queue is full: the kernel drops further SYNs, so connecting hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        gw = gateway_factory(connect_timeout=0.5, retries=0, anthropic_base_url=f"http://127.0.0.1:{port}")
        result = gw.stream(turn("anthropic/text"))
        assert result.types() == ["error"]
        assert result.terminal["errorMessage"] == "anthropic/text connect timeout"
        attempts = gw.job(result.headers["x-request-id"]).attempts
        assert [a.outcome for a in attempts] == ["error"]
    finally:
        for s in fillers:
            s.close()
        listener.close()
