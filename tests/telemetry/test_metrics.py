"""Prometheus metrics after a scripted set of turns, over real loopback HTTP."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import marker, turn
from tests.procs import GatewayProcess


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def scripted(gateway_factory):
    """A fresh gateway (its own registry) that ran: done, error, aborted, and a retried fallback."""
    gw = gateway_factory(api_keys="team:sk-client-key-0001")
    auth = {"Authorization": "Bearer sk-client-key-0001"}
    done = gw.stream(turn("anthropic/text"), headers=auth)
    error = gw.stream(turn("anthropic/error-mid-stream"), headers=auth)
    fallback = gw.stream(turn("anthropic/http-500", fallback=["anthropic/text"]), headers=auth)
    for result in (done, error, fallback):
        gw.job(result.headers["x-request-id"])
    # Aborted: read the first event, then hang up.
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=turn("anthropic/slow;n=500;delay_ms=20"), headers=auth) as r:
            aborted_id = r.headers["x-request-id"]
            for line in r.iter_lines():
                if line.startswith("data:"):
                    break
    aborted = gw.job(aborted_id)
    assert aborted.turn.outcome == "aborted"
    return gw, [done, error, fallback]


def test_requests_by_outcome(scripted):
    gw, (done, error, fallback) = scripted
    assert fallback.terminal["type"] == "done" and error.terminal["type"] == "error"
    m = scrape(gw.url)  # /metrics is open: no Authorization header
    assert value(m, "gateway_requests_total", provider="anthropic", model="text", outcome="done", door="unified") == 2
    # Model ids the catalog does not list share the `other` label (bounded cardinality).
    assert value(m, "gateway_requests_total", provider="anthropic", model="other", outcome="error", door="unified") == 1
    assert (
        value(m, "gateway_requests_total", provider="anthropic", model="other", outcome="aborted", door="unified") == 1
    )
    assert not any("error-mid-stream" in str(key) or "req_" in str(key) for key in m)
    assert value(m, "gateway_active_streams") == 0


def test_retries_fallbacks_cancellations(scripted):
    gw, _ = scripted
    m = scrape(gw.url)
    # retries=1 in the rig: http-500 twice, then the fallback to anthropic/text.
    assert value(m, "gateway_retries_total", provider="anthropic", model="other") == 1
    assert value(m, "gateway_fallbacks_total", provider="anthropic", model="other") == 1
    assert value(m, "gateway_fallbacks_total", provider="anthropic", model="text") == 0
    assert value(m, "gateway_cancellations_total", kind="client") == 1
    assert value(m, "gateway_cancellations_total", kind="shutdown") == 0


def test_latency_tokens_cost_and_events(scripted):
    gw, (done, error, fallback) = scripted
    m = scrape(gw.url)
    assert value(m, "gateway_time_to_first_token_seconds_count", provider="anthropic", model="text") == 2
    assert value(m, "gateway_stream_duration_seconds_count", provider="anthropic", model="text", outcome="done") == 2
    assert value(m, "gateway_upstream_latency_seconds_count", provider="anthropic", model="text") == 2
    assert value(m, "gateway_overhead_seconds_count", provider="anthropic", model="other") == 2
    assert value(m, "gateway_upstream_latency_seconds_sum", provider="anthropic", model="other") > 0
    usage = [r.terminal["usage"] for r in (done, fallback)]
    assert value(m, "gateway_tokens_total", provider="anthropic", model="text", kind="input") == sum(
        u["input"] for u in usage
    )
    assert value(m, "gateway_tokens_total", provider="anthropic", model="text", kind="output") == sum(
        u["output"] for u in usage
    )
    assert value(m, "gateway_cost_usd_total", provider="anthropic", model="text") == pytest.approx(
        sum(u["cost"]["total"] for u in usage)
    )
    sent = len(done.events) + len(error.events) + len(fallback.events)
    assert value(m, "gateway_sse_events_sent_total") >= sent + 1  # plus at least the aborted stream's first event


def test_timeouts_and_late_frames_counted(gateway_factory):
    gw = gateway_factory(first_event_timeout=0.5, retries=0, late_frame_grace=5.0)
    hung = gw.stream(turn("anthropic/hang-before-headers"))
    gw.job(hung.headers["x-request-id"])
    late = gw.stream(turn("anthropic/late-frames"))
    job = gw.job(late.headers["x-request-id"])
    m = scrape(gw.url)
    assert value(m, "gateway_timeouts_total", kind="first_event") == 1
    assert value(m, "gateway_late_frames_dropped_total", provider="anthropic") == job.turn.late_frames > 0


def test_multiprocess_mode(sim, tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR set, values go to files there and /metrics aggregates them."""
    metrics_dir = tmp_path / "prom"
    metrics_dir.mkdir()
    proc = GatewayProcess(sim.url, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir), database_url=f"sqlite:///{tmp_path}/g.db")
    try:
        proc.wait_ready()
        response = httpx.post(f"{proc.url}/v1/stream", json=turn("anthropic/text", marker()), timeout=30)
        assert response.status_code == 200 and "event: done" in response.text
        # The turn's observers run when its pump ends, a moment after the client read `done`: poll.
        deadline = time.monotonic() + 10
        while True:
            m = scrape(proc.url)
            if (
                value(m, "gateway_requests_total", provider="anthropic", model="text", outcome="done", door="unified")
                or time.monotonic() > deadline
            ):
                break
        assert (
            value(m, "gateway_requests_total", provider="anthropic", model="text", outcome="done", door="unified") == 1
        )
        assert value(m, "gateway_active_streams") == 0
        assert any(p.name.startswith("counter_") for p in metrics_dir.iterdir())
        assert any(p.name.startswith("gauge_livesum_") for p in metrics_dir.iterdir())
    finally:
        proc.stop()


METRICS_KEY = "sk-metrics-scraper-0001"


def test_metrics_can_be_protected_by_a_key_of_their_own(gateway_factory):
    gw = gateway_factory(api_keys="tenant:sk-tenant-0001", metrics_key=METRICS_KEY)
    assert gw.http.get("/metrics").status_code == 401
    assert gw.http.get("/metrics", headers={"Authorization": "Bearer sk-tenant-0001"}).status_code == 401
    allowed = gw.http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_KEY}"})
    assert allowed.status_code == 200 and "gateway_requests_total" in allowed.text
    assert gw.http.get("/healthz").status_code == 200  # the probes stay open


def test_per_key_spend_labels_can_be_dropped(gateway_factory):
    gw = gateway_factory(api_keys="tenant-a:sk-tenant-a-0001", metrics_key_labels=False)
    served = gw.stream(turn("anthropic/text"), headers={"Authorization": "Bearer sk-tenant-a-0001"})
    assert served.status == 200 and served.terminal["usage"]["cost"]["total"] > 0
    gw.job(served.headers["x-request-id"])
    text = gw.http.get("/metrics").text
    assert "tenant-a" not in text and "gateway_key_spend_usd_total{" not in text
    spent = [line for line in text.splitlines() if line.startswith("gateway_key_spend_usd_total ")]
    assert len(spent) == 1 and float(spent[0].split()[1]) > 0
