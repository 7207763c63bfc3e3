"""A gateway as a real process (`python -m app`), for shutdown and multi-process tests."""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import httpx

from tests.conftest import HERE, PROVIDER_KEYS

ROOT = HERE.parent


def _port_block() -> range:
    """The loopback ports this test process hands out: a block of its own per pytest-xdist worker (`gw0`, `gw1`,
    …), below the kernel's ephemeral range. So a port `free_port` gives is never the one another worker hands
    out, nor one the kernel gives meanwhile to a `port=0` server or an outgoing connection. Empty when the
    ephemeral range leaves no room below it (then the kernel picks)."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low, size = 20000, 500
    blocks = max(0, (ephemeral_low - low) // size)
    if blocks == 0:
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    start = low + (int(worker) if worker.isdigit() else 0) % blocks * size
    return range(start, start + size)


_BLOCK = _port_block()
_OFFSET = random.randrange(len(_BLOCK)) if _BLOCK else 0  # another test session on the machine starts elsewhere
_IN_TURN = itertools.cycle([*_BLOCK[_OFFSET:], *_BLOCK[:_OFFSET]])


def free_port() -> int:
    """A loopback port nobody listens on now: for a server a test starts in another process, or as a closed
    port. Taken in turn from this worker's block (`_port_block`), skipping ports something holds."""
    for _ in range(len(_BLOCK)):
        port = next(_IN_TURN)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GatewayProcess:
    """`python -m app` with settings pointing at the test simulator. Its own SQLite ledger in a fresh temp
    directory unless `database_url` is given; stdout/stderr piped unless `stderr` (a file) is given. `args`
    replaces `-m app` (e.g. the uvicorn command line the container runs)."""

    def __init__(
        self,
        sim_url: str,
        *,
        port: int | None = None,
        database_url: str | None = None,
        stderr: Any = None,
        args: list[str] | None = None,
        **env: str,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        values = {
            **os.environ,
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_PORT": str(self.port),
            "ANTHROPIC_API_KEY": PROVIDER_KEYS["anthropic"],
            "GATEWAY_ANTHROPIC_BASE_URL": f"{sim_url}/anthropic",
            "GATEWAY_CATALOG": str(HERE / "catalog.json"),
            "GATEWAY_DATABASE_URL": database_url or f"sqlite:///{tempfile.mkdtemp(prefix='gateway-test-')}/gateway.db",
            "GATEWAY_LOG_LEVEL": "warning",
            **env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, *(args or ["-m", "app"])],
            cwd=ROOT,
            env=values,
            stdout=subprocess.PIPE if stderr is None else subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr is None else stderr,
        )

    def wait_ready(self, timeout: float = 180) -> None:
        """Poll `/readyz` until the process serves (a loaded machine can take a while to import the SDKs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                detail = self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else "see its log"
                raise RuntimeError(f"gateway exited: {detail}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # polling a starting process, not synchronising the test
        raise RuntimeError("gateway did not become ready")

    def stop(self) -> Any:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(10)

    def __enter__(self) -> GatewayProcess:
        """`with GatewayProcess(...) as process`: ready when the block starts (`wait_ready`), stopped after it, even
        when it never became ready."""
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll state that another process changes (its records, its metrics) until `condition()` holds; an
    AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition never held")
