"""Retry and fallback above the adapters (CONTRACT §3): only before content reached the client."""

from __future__ import annotations

import json

from tests.conftest import marker, turn


def test_retryable_failure_falls_back_and_start_names_the_server(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-529", m, fallback=["anthropic/text"]))
    assert result.events[0]["type"] == "start" and result.events[0]["model"] == "text"
    assert result.terminal["type"] == "done" and result.message["model"] == "text"
    job = gateway.job(result.headers["x-request-id"])
    assert [(a.model, a.outcome, a.http_status) for a in job.attempts] == [
        ("http-529", "error", 529),
        ("http-529", "error", 529),
        ("text", "done", None),
    ]
    assert "HTTP 529" in job.attempts[0].error_message
    assert [e["model"] for e in gateway.sim.seen(m)] == ["http-529", "http-529", "text"]


def test_connection_refused_falls_back(gateway_factory, tmp_path, monkeypatch):
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "name": "deadend",
                        "api": "anthropic-messages",
                        "keyEnv": "DEADEND_TEST_KEY",
                        "baseUrl": "http://127.0.0.1:9",
                    }
                ]
            }
        )
    )
    monkeypatch.setenv("DEADEND_TEST_KEY", "not-a-real-key")
    gw = gateway_factory(catalog=str(catalog), retries=0)
    result = gw.stream(turn("deadend/claude-x", fallback=["anthropic/text"]))
    assert result.events[0]["provider"] == "anthropic"
    job = gw.job(result.headers["x-request-id"])
    assert job.attempts[0].provider == "deadend" and "connection failed" in job.attempts[0].error_message
    assert job.attempts[1].outcome == "done"


def test_error_before_content_is_retried(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/error-before-content", m, fallback=["anthropic/thinking"]))
    assert result.events[0]["model"] == "thinking"
    assert len(gateway.sim.seen(m)) == 3


def test_failure_after_content_never_switches_provider(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/error-mid-stream", m, fallback=["anthropic/text"]))
    assert result.terminal["type"] == "error"
    assert result.events[0]["model"] == "error-mid-stream"
    assert len(gateway.sim.seen(m)) == 1
    job = gateway.job(result.headers["x-request-id"])
    assert len(job.attempts) == 1 and job.attempts[0].outcome == "error"


def test_non_retryable_error_does_not_fall_back(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-400", m, fallback=["anthropic/text"]))
    assert result.types() == ["error"]
    assert len(gateway.sim.seen(m)) == 1


def test_retry_after_is_capped(gateway_factory):
    gw = gateway_factory(retry_after_cap_ms=200, retries=1)
    m = marker()
    result = gw.stream(turn("anthropic/http-429;retry_after=30", m))
    assert result.terminal["errorMessage"].endswith("retry-after-ms=30000")
    first, second = gw.sim.seen(m)
    gap = second["startedAt"] - first["startedAt"]
    assert 0.19 <= gap < 10  # waited the cap, not the 30 s the upstream asked for


def test_retry_after_ms_header_is_preferred_precision(gateway):
    m = marker()
    result = gateway.stream(turn("anthropic/http-429;retry_after_ms=250", m))
    assert result.terminal["errorMessage"].endswith("retry-after-ms=250")


def test_retry_after_ms_wins_over_a_larger_retry_after_sent_with_it(gateway):
    """Azure's throttling answer carries `retry-after-ms: 600` and `retry-after: 1` (issue 39 item 10): the
    retry waits what the precise header says, and the client's error names it."""
    m = marker()
    result = gateway.stream(turn("anthropic/http-429;retry_after_ms=600;retry_after=1", m))
    assert result.terminal["errorMessage"].endswith("retry-after-ms=600")
    assert len(gateway.sim.seen(m)) == 2


def test_unknown_fallback_model_is_a_404_naming_the_param(gateway):
    response = gateway.http.post("/v1/stream", json=turn("anthropic/text", fallback=["nope/x"]))
    assert response.status_code == 404
    assert response.json()["error"]["param"] == "fallback.0"
