"""A gateway as a real process (`python -m app`), for shutdown and multi-process tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from tests.conftest import HERE, PROVIDER_KEYS

ROOT = HERE.parent


def free_port() -> int:
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
