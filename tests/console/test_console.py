"""The console over plain HTTP: off by default, its security headers, the health summary and the records
filters (the browser tests are in tests/console/test_console_browser.py)."""

from __future__ import annotations

import pytest

from app.api.console import CONTENT_SECURITY_POLICY
from app.telemetry.health import HealthWindow, percentiles
from app.settings import Settings
from app.core.settled import settled_turn
from app.contract.failures import Attempt, ErrorKind, Interrupt
from tests.conftest import marker, turn

KEY = "sk-console-http-0123456789"
OTHER = "sk-console-http-other-0123456789"


@pytest.fixture(scope="module")
def console_gateway(gateway_factory):
    return gateway_factory(console=True, api_keys=f"alice:{KEY},bob:{OTHER}")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_console_is_off_by_default(gateway):
    assert Settings().console is None and Settings().demo is False
    for path in ["/console", "/console/main.js", "/v1/console/summary", "/v1/console/pools"]:
        assert gateway.http.get(path).status_code == 404


def test_console_page_and_files_carry_a_strict_policy(console_gateway):
    page = console_gateway.http.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert page.headers["x-content-type-options"] == "nosniff" and page.headers["x-frame-options"] == "DENY"
    assert "<script" in page.text and "<script>" not in page.text  # modules from files, nothing inline
    assert console_gateway.http.get("/console/").text == page.text
    script = console_gateway.http.get("/console/main.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert script.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


@pytest.mark.parametrize(
    "path", ["/console/..%2Fsettings.py", "/console/missing.js", "/console/.hidden.js", "/console/x.py"]
)
def test_console_serves_only_its_own_files(console_gateway, path):
    assert console_gateway.http.get(path).status_code == 404


def test_console_needs_no_key_but_the_summary_does(console_gateway):
    assert console_gateway.http.get("/console").status_code == 200
    refused = console_gateway.http.get("/v1/console/summary")
    assert refused.status_code == 401
    assert console_gateway.http.get("/v1/console/summary", headers=auth("sk-wrong")).status_code == 401
    assert console_gateway.http.get("/v1/console/summary", headers=auth(KEY)).status_code == 200
    assert console_gateway.http.get("/v1/console/pools").status_code == 401
    pools = console_gateway.http.get("/v1/console/pools", headers=auth(KEY))
    assert pools.status_code == 200 and pools.json()["pools"] == []  # this catalog has no pool


def test_summary_counts_the_callers_turns_only(console_gateway):
    before = console_gateway.http.get("/v1/console/summary", headers=auth(OTHER)).json()
    done = console_gateway.stream(turn("anthropic/claude-sonnet-4-5"), headers=auth(KEY))
    failed = console_gateway.stream(turn("anthropic/error-mid-stream"), headers=auth(KEY))
    console_gateway.job(done.headers["x-request-id"])
    console_gateway.job(failed.headers["x-request-id"])
    summary = console_gateway.http.get("/v1/console/summary", params={"minutes": 5}, headers=auth(KEY)).json()
    assert summary["windowMinutes"] == 5 and len(summary["minutes"]) == 5
    assert summary["turns"]["done"] >= 1 and summary["turns"]["error"] >= 1
    assert summary["ttftMs"]["count"] >= 2 and summary["ttftMs"]["p50"] is not None
    assert summary["providers"]["anthropic"]["turns"] >= 2 and summary["providers"]["anthropic"]["errors"] >= 1
    assert summary["minutes"][-1]["turns"]["done"] >= 1
    # another key sees none of them
    after = console_gateway.http.get("/v1/console/summary", headers=auth(OTHER)).json()
    assert after["turns"] == before["turns"]


def test_summary_counts_fallbacks_and_retries_by_provider():
    window = HealthWindow(clock=lambda: 600.0)

    class Job:
        upstream_wait = 0.0
        upstream_frames = 0
        attempts = [
            Attempt("anthropic", "anthropic-messages", "m", kind=ErrorKind.HTTP, http_status=500),
            Attempt("anthropic", "anthropic-messages", "m", kind=ErrorKind.TIMEOUT, interrupt=Interrupt.FIRST_EVENT),
            Attempt("openai", "openai-responses", "g"),
        ]

        class turn:
            request_id = "req_1"
            outcome = "done"
            created_at = 0.0
            first_content_at = None
            message = {"provider": "openai"}

        class request:
            api_key_id = "k"
            started_wall = 600.0

        client_disconnected = False
        ended_by = None

    window.turn_finished(Job(), settled_turn(Job, now=0.0))
    summary = window.summary("k", 3)
    assert summary["providers"]["anthropic"] == {"turns": 0, "errors": 0, "retries": 1, "fallbacks": 1, "timeouts": 1}
    assert summary["providers"]["openai"]["turns"] == 1
    assert [m["start"] for m in summary["minutes"]] == [480_000, 540_000, 600_000]
    assert summary["minutes"][-1]["turns"] == {"done": 1}
    assert window.summary("someone-else", 3)["turns"] == {}


def test_percentiles_are_nearest_rank_in_milliseconds():
    assert percentiles([]) == {"count": 0, "p50": None, "p90": None, "p99": None}
    samples = [i / 1000 for i in range(1, 101)]  # 1 … 100 ms
    assert percentiles(samples) == {"count": 100, "p50": 50.0, "p90": 90.0, "p99": 99.0}


def test_records_filter_by_outcome_and_model(console_gateway):
    m = marker()
    ok = console_gateway.stream(turn("anthropic/claude-sonnet-4-5", m), headers=auth(KEY))
    bad = console_gateway.stream(turn("openai/error-mid-stream", m), headers=auth(KEY))
    ok_id, bad_id = ok.headers["x-request-id"], bad.headers["x-request-id"]
    console_gateway.job(ok_id), console_gateway.job(bad_id)

    def ids(**params):
        response = console_gateway.http.get("/v1/requests", params={"limit": 200, **params}, headers=auth(KEY))
        assert response.status_code == 200, response.text
        return [r["requestId"] for r in response.json()["records"]]

    assert ok_id in ids(outcome="done") and bad_id not in ids(outcome="done")
    assert bad_id in ids(outcome="error") and ok_id not in ids(outcome="error")
    assert bad_id in ids(model="error-mid") and ok_id not in ids(model="error-mid")
    assert ids(model="openai/", outcome="error")[0] == bad_id
    assert len(ids(outcome="done", limit=1)) == 1
    bogus = console_gateway.http.get("/v1/requests", params={"outcome": "maybe"}, headers=auth(KEY))
    assert bogus.status_code == 422
    # another key's records never match
    other = console_gateway.http.get("/v1/requests", params={"model": "error-mid"}, headers=auth(OTHER)).json()
    assert bad_id not in [r["requestId"] for r in other["records"]]
