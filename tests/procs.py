"""A gateway as a real process (`python -m app`), for shutdown and multi-process tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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
    def __init__(self, sim_url: str, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        values = {
            **os.environ,
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_PORT": str(self.port),
            "ANTHROPIC_API_KEY": PROVIDER_KEYS["anthropic"],
            "GATEWAY_ANTHROPIC_BASE_URL": f"{sim_url}/anthropic",
            "GATEWAY_CATALOG": str(HERE / "catalog.json"),
            "GATEWAY_DATABASE_URL": f"sqlite:///{env.pop('_db', '/tmp/gateway-test-unused.db')}",
            "GATEWAY_LOG_LEVEL": "warning",
            **env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, env=values, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # polling a starting process, not synchronising the test
        raise RuntimeError("gateway did not start")

    def stop(self) -> Any:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(10)
