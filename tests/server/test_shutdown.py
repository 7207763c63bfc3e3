"""Graceful shutdown: SIGTERM with streams in flight, as a real `python -m app` process."""

from __future__ import annotations

import json
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conformance import check_frames, parse_sse
from tests.conftest import marker, turn
from tests.procs import GatewayProcess, free_port
from tests.resume_client import read_some

STREAMS = 20
SLOW = "anthropic/slow;n=300;delay_ms=20"  # about 6 s: cannot finish inside a 1 s drain


def test_sigterm_settles_every_stream(sim, tmp_path):
    proc = GatewayProcess(
        sim.url,
        GATEWAY_DRAIN_TIMEOUT="1",
        GATEWAY_KEEPALIVE_INTERVAL="0.5",
        database_url=f"sqlite:///{tmp_path}/gateway.db",
    )
    try:
        proc.wait_ready()
        assert httpx.get(f"{proc.url}/readyz", timeout=5).json() == {"status": "ready"}
        all_started = threading.Barrier(STREAMS + 1, timeout=30)

        def run_stream() -> str:
            with httpx.Client(base_url=proc.url, timeout=60) as client:
                with client.stream("POST", "/v1/stream", json=turn(SLOW, marker())) as response:
                    assert response.status_code == 200
                    lines, started = [], False
                    for line in response.iter_lines():
                        lines.append(line)
                        if not started and line.startswith("data:"):
                            started = True
                            all_started.wait()
                    return "\n".join(lines) + "\n"

        with ThreadPoolExecutor(STREAMS) as pool:
            futures = [pool.submit(run_stream) for _ in range(STREAMS)]
            all_started.wait()  # every stream has its first event: all 20 are in flight
            proc.proc.send_signal(signal.SIGTERM)
            bodies = [f.result(timeout=60) for f in futures]

        for body in bodies:
            events = check_frames(parse_sse(body))  # exactly one terminal event, last
            terminal = events[-1]
            assert terminal["type"] == "error" and terminal["reason"] == "error", terminal
            assert terminal["errorMessage"] == f"{SLOW} gateway shutting down"
            assert terminal["message"]["content"][0]["text"]  # the partial text is kept

        assert proc.proc.wait(timeout=60) in (0, -signal.SIGTERM)
        # Each settled turn wrote its request log line (JSON), no keys anywhere.
        stderr = proc.proc.stderr.read().decode()
        settled = [json.loads(line) for line in stderr.splitlines() if '"gateway.requests"' in line]
        assert len(settled) == STREAMS
        assert all(entry["errorMessage"].endswith("gateway shutting down") for entry in settled)
        assert "PROVIDERKEY" not in stderr
    finally:
        proc.stop()


def test_draining_gateway_is_unready_and_refuses_turns(gateway_factory):
    gw = gateway_factory()
    assert gw.http.get("/readyz").status_code == 200
    gw.server.call(gw.state.drain(0))
    ready = gw.http.get("/readyz")
    assert ready.status_code == 503 and ready.json() == {"status": "draining"}
    refused = gw.http.post("/v1/stream", json=turn("anthropic/text"))
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "shutting_down"
    assert gw.http.get("/healthz").status_code == 200  # still alive while draining


def _uvicorn_command_line(port: int) -> list[str]:
    """The server command of the container's entrypoint (deploy/docker-entrypoint.sh), on a test port."""
    return [
        "-m",
        "uvicorn",
        "app.main:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--loop",
        "uvloop",
        "--http",
        "app.server.hosting:BoundedHttpToolsProtocol",
        "--timeout-graceful-shutdown",
        "70",
    ]


@pytest.mark.parametrize("server", ["python -m app", "uvicorn command line"])
def test_new_connections_during_drain_are_answered_503(sim, tmp_path, server):
    """While in-flight turns drain, the listener stays open: a load balancer's probe and a new turn on a new
    connection get 503 (draining), not a refused connection."""
    port = free_port()
    proc = GatewayProcess(
        sim.url,
        port=port,
        GATEWAY_DRAIN_TIMEOUT="60",
        database_url=f"sqlite:///{tmp_path}/gateway.db",
        args=_uvicorn_command_line(port) if server.startswith("uvicorn") else None,
    )
    try:
        proc.wait_ready()
        with httpx.Client(base_url=proc.url, timeout=60) as client:
            with client.stream("POST", "/v1/stream", json=turn(SLOW, marker())) as response:
                lines = response.iter_lines()
                assert any(line.startswith("data:") for line in lines)  # the turn is in flight
                proc.proc.send_signal(signal.SIGTERM)
                for _ in range(600):  # until the gateway has noticed the signal; every answer must be HTTP
                    with httpx.Client(base_url=proc.url, timeout=10) as fresh:
                        ready = fresh.get("/readyz")
                    if ready.status_code == 503:
                        break
                assert ready.json() == {"status": "draining"}
                with httpx.Client(base_url=proc.url, timeout=10) as fresh:
                    refused = fresh.post("/v1/stream", json=turn("anthropic/text"))
                    assert refused.status_code == 503 and refused.json()["error"]["type"] == "shutting_down"
                    assert fresh.get("/healthz").status_code == 200
                rest = "\n".join(lines)
        assert '"type":"done"' in rest  # the in-flight turn finished within the drain
        assert proc.proc.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        proc.stop()


def test_a_resumption_ends_on_sigterm_as_a_turn_does(sim, tmp_path):
    """One SSE path: on SIGTERM a resumption (`GET /v1/stream/{id}`) of a turn whose first reader left ends as
    a live turn's stream does: every event once, the terminal `error` "gateway shutting down" last, then a
    clean end of stream (an unfinished chunked body would make httpx raise)."""
    proc = GatewayProcess(
        sim.url,
        GATEWAY_DRAIN_TIMEOUT="1",
        GATEWAY_KEEPALIVE_INTERVAL="0.5",
        GATEWAY_RESUME_GRACE="60",  # the left turn runs on until the drain settles it
        database_url=f"sqlite:///{tmp_path}/gateway.db",
    )
    try:
        proc.wait_ready()
        left = turn(SLOW, marker())
        left["options"]["resumable"] = True
        request_id, _ = read_some(proc.url, left, {}, 3)  # its first reader leaves after 3 events
        both_reading = threading.Barrier(3, timeout=30)

        def read_to_the_end(method: str, path: str, body: dict | None) -> str:
            with httpx.Client(base_url=proc.url, timeout=60) as client:
                with client.stream(method, path, json=body) as response:
                    assert response.status_code == 200
                    lines, reading = [], False
                    for line in response.iter_lines():
                        lines.append(line)
                        if not reading and line.startswith("data:"):
                            reading = True
                            both_reading.wait()
                    return "\n".join(lines) + "\n"

        with ThreadPoolExecutor(2) as pool:
            live = pool.submit(read_to_the_end, "POST", "/v1/stream", turn(SLOW, marker()))
            resumed = pool.submit(read_to_the_end, "GET", f"/v1/stream/{request_id}", None)
            both_reading.wait()
            proc.proc.send_signal(signal.SIGTERM)
            bodies = {"live turn": live.result(timeout=60), "resumption": resumed.result(timeout=60)}

        endings = {}
        for name, body in bodies.items():
            events = check_frames(parse_sse(body))  # from the first event, exactly one terminal event, last
            terminal = events[-1]
            endings[name] = (terminal["type"], terminal["reason"], terminal["errorMessage"])
            assert terminal["message"]["content"][0]["text"], name  # the partial text is kept
        assert endings["resumption"] == endings["live turn"] == ("error", "error", f"{SLOW} gateway shutting down")
        assert proc.proc.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        proc.stop()
