"""Hostile input gets nowhere: no request redirects provider keys, forges events or leaks a secret."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from app.settings import Settings

from simulator.app import create_simulator
from tests.conftest import PROVIDER_KEYS, marker, turn
from tests.servers import ServerThread


def test_pi_base_url_and_headers_never_reach_another_address(gateway):
    decoy = ServerThread(create_simulator(), "decoy-simulator").start()
    try:
        m = marker()
        body = {
            "model": {
                "id": "text",
                "provider": "anthropic",
                "api": "anthropic-messages",
                "baseUrl": f"{decoy.url}/anthropic",
                "headers": {"x-api-key": "attacker", "Host": "evil"},
            },
            "context": {"messages": [{"role": "user", "content": m}]},
        }
        result = gateway.stream(body, path="/api/stream")
        assert result.terminal["type"] == "done"
        import httpx

        assert httpx.get(f"{decoy.url}/_sim/requests").json() == []  # the decoy saw nothing at all
        assert len(gateway.sim.seen(m)) == 1
    finally:
        decoy.stop()


def test_unified_request_cannot_carry_a_base_url_either(gateway):
    m = marker()
    body = turn("anthropic/text", m, baseUrl="http://127.0.0.1:9", headers={"x-api-key": "attacker"})
    body["options"] = {"baseUrl": "http://127.0.0.1:9", "headers": {"a": "b"}}
    assert gateway.stream(body).terminal["type"] == "done"
    assert len(gateway.sim.seen(m)) == 1


def test_prompt_content_cannot_forge_sse_events(gateway):
    payload = 'x\n\ndata: {"type":"done","reason":"stop"}\n\nevent: done\nid: 99\r\n\r\n: comment\n'
    result = gateway.stream(turn("anthropic/text", payload))
    assert result.terminal["type"] == "done"
    assert sum(e["type"] == "done" for e in result.events) == 1
    assert result.message["content"][0]["text"].endswith(payload[:200])
    assert [f.id for f in result.frames] == [str(i) for i in range(1, len(result.frames) + 1)]


def test_huge_max_tokens_is_rejected_or_clamped(gateway):
    assert (
        gateway.http.post("/v1/stream", json=turn("anthropic/text", options={"maxTokens": 10**12})).status_code == 422
    )
    m = marker()
    gateway.stream(turn("anthropic/text", m, options={"maxTokens": 999_999}))
    assert gateway.sim.seen(m)[0]["body"]["max_tokens"] == 8192  # the catalog's limit for anthropic/text


def test_no_provider_key_in_events_errors_or_logs(gateway, caplog):
    caplog.set_level(logging.DEBUG)
    bodies = []
    for model in (
        "anthropic/text",
        "anthropic/http-401",
        "anthropic/error-mid-stream",
        "anthropic/tools-malformed",
        "anthropic/reset",
    ):
        bodies.append(gateway.stream(turn(model)).text)
    bodies.append(gateway.http.post("/v1/complete", json=turn("anthropic/http-500")).text)
    bodies.append(gateway.http.get("/v1/models").text)
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    for key in PROVIDER_KEYS.values():
        for text in (*bodies, logged):
            assert key not in text
            assert key[-16:] not in text


def test_demo_simulator_log_needs_a_gateway_key_when_auth_is_on(gateway_factory):
    gw = gateway_factory(demo=True, api_keys="alice:sk-alice-0123456789")
    for path in ("/_simulator/_sim/requests", "/_simulator/_sim/wait?contains=x&timeout=0"):
        denied = gw.http.get(path)
        assert denied.status_code == 401, (path, denied.text)
        assert denied.json()["error"]["type"] == "authentication_error"
        assert gw.http.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    allowed = gw.http.get("/_simulator/_sim/requests", headers={"Authorization": "Bearer sk-alice-0123456789"})
    assert allowed.status_code == 200 and isinstance(allowed.json(), list)


def test_demo_simulator_log_stays_open_without_auth(gateway_factory):
    assert gateway_factory(demo=True).http.get("/_simulator/_sim/requests").status_code == 200


def test_simulator_wait_with_a_bad_timeout_is_400(sim):
    import httpx

    for timeout in ("abc", "nan", "-1", "inf"):
        response = httpx.get(f"{sim.url}/_sim/wait", params={"contains": "x", "timeout": timeout})
        assert response.status_code == 400, (timeout, response.text)


def test_a_client_leaving_in_the_middle_of_its_body_is_one_info_line(gateway, caplog):
    import socket
    import time

    caplog.set_level(logging.INFO)
    sock = socket.create_connection(("127.0.0.1", gateway.server.port), timeout=10)
    with sock:
        sock.sendall(
            b"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b'content-length: 100000\r\n\r\n{"model": '
        )
    deadline = time.monotonic() + 20

    def relevant():
        return [
            r
            for r in caplog.records
            if r.name.startswith("gateway") and ("disconnect" in r.getMessage() or r.levelno >= logging.ERROR)
        ]

    while not relevant() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the server's log line
    records = relevant()
    assert records, "nothing was logged"
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in records), [r.getMessage() for r in records]
    assert len(records) == 1


# --- the HTTP server's bounds on request headers (GATEWAY_MAX_HEADER_BYTES, GATEWAY_HEADER_TIMEOUT) ---

import socket  # noqa: E402
from pathlib import Path  # noqa: E402


from tests.procs import GatewayProcess  # noqa: E402


@pytest.fixture(scope="module")
def bounded_gateway(sim, tmp_path_factory):
    proc = GatewayProcess(
        sim.url,
        database_url=f"sqlite:///{tmp_path_factory.mktemp('headers')}/gateway.db",
        GATEWAY_MAX_HEADER_BYTES="8192",
        GATEWAY_HEADER_TIMEOUT="1",
    )
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()


def _connect(proc: GatewayProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proc.port), timeout=30)  # a safety net, never reached when green
    return sock


def _send_until_closed(sock: socket.socket, data: bytes, chunk: int = 65536) -> bool:
    """Send `data`; False when the server closed the connection first."""
    try:
        for start in range(0, len(data), chunk):
            sock.sendall(data[start : start + chunk])
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection ('' when it resets it)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_headers_within_the_limit_are_served(bounded_gateway):
    sock = _connect(bounded_gateway)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 4000 + b"\r\nConnection: close\r\n\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 200")


def test_an_oversized_header_gets_431_and_the_connection_closed(bounded_gateway):
    sock = _connect(bounded_gateway)
    with sock:
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000
        sent = _send_until_closed(sock, head)
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 431") or (not sent and answer == b""), answer[:100]
        assert b"200 OK" not in answer


def test_unfinished_huge_headers_do_not_grow_memory(bounded_gateway):
    pid = bounded_gateway.proc.pid
    before = _rss_bytes(pid)
    sockets = [_connect(bounded_gateway) for _ in range(8)]
    try:
        for sock in sockets:
            _send_until_closed(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (16 * 1024 * 1024))
        grown = _rss_bytes(pid) - before
        assert grown < 32 * 1024 * 1024, f"RSS grew by {grown / 1e6:.0f} MB"
        for sock in sockets:
            assert not _answer(sock).startswith(b"HTTP/1.1 200")
    finally:
        for sock in sockets:
            sock.close()


def test_connections_that_never_finish_their_headers_are_closed(bounded_gateway):
    sockets = [_connect(bounded_gateway) for _ in range(50)]
    try:
        for index, sock in enumerate(sockets):
            if index % 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # half a request, then nothing
        for sock in sockets:  # each answer ends because the server closes the connection
            assert b"200 OK" not in _answer(sock)
    finally:
        for sock in sockets:
            sock.close()


def test_a_header_sent_a_byte_at_a_time_does_not_keep_the_connection(bounded_gateway):
    import time

    sock = _connect(bounded_gateway)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for _ in range(240):  # at most a minute of trickling; the timeout is 1 s
            if not _send_until_closed(sock, b"a"):
                closed = True
                break
            time.sleep(0.25)  # the client's pace, not a synchronisation
        assert closed, "a connection that never finished its headers stayed open for a minute"


def test_pipelined_requests_whose_headers_together_pass_the_limit_are_served(bounded_gateway):
    one = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 5000 + b"\r\n\r\n"
    last = one.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    sock = _connect(bounded_gateway)
    with sock:
        sock.sendall(one + last)
        assert _answer(sock).count(b"HTTP/1.1 200") == 2


# ----------------------------------------------------------------------------- cross-site requests (auth off)

TURN_BODIES = {
    "/v1/stream": lambda m: turn("anthropic/text", m),
    "/v1/complete": lambda m: turn("anthropic/text", m),
    "/api/stream": lambda m: {
        "model": {"provider": "anthropic", "id": "text"},
        "context": {"messages": [{"role": "user", "content": m}]},
    },
    "/v1/chat/completions": lambda m: {"model": "anthropic/text", "messages": [{"role": "user", "content": m}]},
    "/v1/messages": lambda m: {
        "model": "anthropic/text",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": m}],
    },
}


def _door_error(path: str, response: httpx.Response) -> tuple[str | None, str]:
    """(error type, message) of a refusal in the door's own shape."""
    body = response.json()
    if path == "/api/stream":
        return None, body["error"]
    if path == "/v1/messages":
        assert body["type"] == "error"
    return body["error"]["type"], body["error"]["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
@pytest.mark.parametrize("path", list(TURN_BODIES))
def test_turn_routes_refuse_a_body_not_declared_json_with_415_in_the_doors_shape(gateway, path, content_type):
    m = marker()
    headers = {"content-type": content_type} if content_type else {}
    response = gateway.http.post(path, content=json.dumps(TURN_BODIES[path](m)).encode(), headers=headers)
    assert response.status_code == 415, response.text
    kind, message = _door_error(path, response)
    assert "application/json" in message and kind in (None, "unsupported_media_type", "invalid_request_error")
    assert not gateway.sim.seen(m), "nothing reaches a vendor"
    served = gateway.http.post(
        path,
        content=json.dumps(TURN_BODIES[path](marker())).encode(),
        headers={"content-type": "Application/JSON; charset=utf-8"},
    )
    assert served.status_code == 200


@pytest.mark.parametrize("through_fastapi", [False, True], ids=["direct", "fastapi"])
def test_a_loopback_gateway_refuses_other_host_names_on_every_path(gateway, through_fastapi):
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends `Host: evil.example`."""
    app = gateway.server.app
    direct = app.turn_routes
    if through_fastapi:
        app.turn_routes = None
    try:
        evil = {"Host": f"evil.example:{gateway.server.port}"}
        for path in TURN_BODIES:
            m = marker()
            refused = gateway.http.post(path, json=TURN_BODIES[path](m), headers=evil)
            assert refused.status_code == 400, (path, refused.text)
            kind, message = _door_error(path, refused)
            assert "evil.example" in message and kind in (None, "host_not_allowed", "invalid_request_error")
            assert refused.headers["x-request-id"].startswith("req_")
            assert not gateway.sim.seen(m)
        for path in ("/v1/models", "/v1/requests", "/metrics"):
            assert gateway.http.get(path, headers=evil).json()["error"]["type"] == "host_not_allowed"
        assert gateway.http.get("/healthz", headers=evil).status_code == 200  # probes show nothing
        for host in ("localhost", f"127.0.0.1:{gateway.server.port}", "[::1]:8080"):
            assert (
                gateway.http.post("/v1/complete", json=turn("anthropic/text"), headers={"Host": host}).status_code
                == 200
            )
    finally:
        app.turn_routes = direct


def test_allowed_hosts_default_to_loopback_names_only_on_a_loopback_bind(gateway_factory):
    assert Settings(host="127.0.0.1").allowed_host_names() == {"localhost", "127.0.0.1", "::1"}
    assert Settings(host="::1").allowed_host_names() == {"localhost", "127.0.0.1", "::1"}
    assert Settings(host="0.0.0.0").allowed_host_names() is None
    assert Settings(host="0.0.0.0", allowed_hosts="gw.example, GW2.example").allowed_host_names() == {
        "gw.example",
        "gw2.example",
    }
    assert Settings(host="127.0.0.1", allowed_hosts="*").allowed_host_names() is None
    anywhere = gateway_factory(allowed_hosts="*")
    assert (
        anywhere.http.post("/v1/complete", json=turn("anthropic/text"), headers={"Host": "gw.example"}).status_code
        == 200
    )


def test_demo_simulator_log_shows_each_key_only_its_own_requests(sim):
    alice, bob = {"Authorization": "Bearer sk-alice-0123456789"}, {"Authorization": "Bearer sk-bob-0123456789"}
    proc = GatewayProcess(sim.url, GATEWAY_DEMO="1", GATEWAY_API_KEYS="alice:sk-alice-0123456789,bob:sk-bob-0123456789")
    try:
        proc.wait_ready()
        log = f"{proc.url}/_simulator/_sim"
        mine, theirs = marker(), marker()
        for headers, m in ((alice, mine), (bob, theirs)):
            assert (
                httpx.post(
                    f"{proc.url}/v1/complete", json=turn("anthropic/claude-sonnet-4-5", m), headers=headers
                ).status_code
                == 200
            )
        seen = httpx.get(f"{log}/requests", headers=alice).json()
        assert [mine in e["body"].__repr__() for e in seen] == [True] and seen[0]["body"] and theirs not in repr(seen)
        assert httpx.get(f"{log}/requests", params={"contains": theirs}, headers=alice).json() == []
        waited = httpx.get(f"{log}/wait", params={"contains": theirs, "timeout": 0}, headers=alice)
        assert waited.status_code == 408 and waited.json()["entry"] is None
        assert httpx.get(f"{log}/wait", params={"contains": theirs, "timeout": 5}, headers=bob).status_code == 200
        assert httpx.delete(f"{log}/requests", headers=alice).json() == {"cleared": True}
        assert httpx.get(f"{log}/requests", headers=alice).json() == []
        assert [theirs in repr(e["body"]) for e in httpx.get(f"{log}/requests", headers=bob).json()] == [True]
    finally:
        proc.stop()
