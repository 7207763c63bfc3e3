"""A client that stops reading makes the gateway stop reading the upstream (TCP back-pressure end to end).

It runs against a real `python -m app` process, because what is under test is the client socket's send
buffer: the gateway fixes it (`GATEWAY_SEND_BUFFER_BYTES`, 256 KiB) so that a non-reading client cannot
absorb megabytes in the kernel while the gateway keeps pulling the vendor's stream.
"""

from __future__ import annotations

import json
import socket
import time

import httpx

from tests.conftest import marker, turn
from tests.procs import GatewayProcess

N, SIZE = 40_000, 256  # a 10 MB stream, unpaced: the simulator writes as fast as it is read
STREAM = f"anthropic/slow;n={N};delay_ms=0;size={SIZE}"


def _open_without_reading(port: int, body: bytes) -> tuple[socket.socket, str]:
    """POST /v1/stream from a socket with a small receive buffer; read the response head and nothing more."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    request_id = next(
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"x-request-id:")
    )
    return sock, request_id


def _settled_record(url: str, request_id: str, timeout: float = 30) -> dict:
    """The turn's record once the (batched) ledger writer has stored its outcome."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/v1/requests/{request_id}", timeout=5)
        if record.status_code == 200 and record.json()["outcome"] is not None:
            return record.json()
        time.sleep(0.05)  # polling another process's store, not synchronising the test
    raise AssertionError(f"record {request_id} not settled")


def test_a_client_that_stops_reading_stops_the_upstream(sim, tmp_path):
    proc = GatewayProcess(sim.url, database_url=f"sqlite:///{tmp_path}/gateway.db")
    try:
        proc.wait_ready()
        m = marker()
        sock, request_id = _open_without_reading(proc.port, json.dumps(turn(STREAM, m)).encode())
        try:
            # Give the stream every chance to run through: unpaced, the simulator and the gateway move
            # megabytes per second, so within this window a gateway without back-pressure reads the
            # client's whole (autotuned, several MB) kernel buffer's worth of it.
            httpx.get(f"{sim.url}/_sim/wait", params={"contains": m, "until": "finished", "timeout": 5}, timeout=30)
        finally:
            sock.close()
        # The upstream request ends: closed by the gateway, or (when the kernel buffers on the upstream side,
        # autotuned up to `net.ipv4.tcp_rmem`'s maximum, took the whole stream) sent to the end unread.
        upstream = sim.wait(m, until="finished", timeout=30)
        assert upstream["clientClosed"] or upstream["completed"]
        record = _settled_record(proc.url, request_id)
    finally:
        proc.stop()

    assert record["outcome"] == "aborted" and record["clientDisconnected"] is True
    read = len(record["message"]["content"][0]["text"])
    # What the gateway took from the upstream while the client read nothing: the client's fixed send buffer
    # (the kernel doubles the 256 KiB), the turn's pending bound (256 KiB) and the frames in flight.
    # About 0.7 MB here; with the kernel's autotuned buffer instead (GATEWAY_SEND_BUFFER_BYTES=0), 2.9 MB.
    assert 0 < read < 1.5 * 2**20, f"the gateway read {read} bytes for a client that read none"
