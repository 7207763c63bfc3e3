"""A redis-server of a test's own (own port, own directory), which the test may stop and restart empty.

Tests never restart the machine's shared Redis: other tests and tools use it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.procs import free_port


class RedisServer:
    def __init__(self) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="gateway-redis-")
        self.proc: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # polling a starting process
            if self.ping():
                return self
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def client(self):
        import redis

        return redis.Redis(port=self.port, decode_responses=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def restart_empty(self) -> None:
        """Stop and start again with no data (persistence is off)."""
        self.stop()
        self.start()


@contextmanager
def two_replicas(simulator_url: str, tmp: Path, env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Two `python -m app` processes sharing one SQLite ledger in `tmp` and their own redis-server, whose URL
    is added to `env`: `{"a", "b", "redis"}`."""
    from tests.procs import GatewayProcess

    redis_server = RedisServer().start()
    env = {**env, "GATEWAY_REDIS_URL": redis_server.url}
    database = f"sqlite:///{tmp}/shared.db"
    a = GatewayProcess(simulator_url, database_url=database, **env)
    b = GatewayProcess(simulator_url, database_url=database, **env)
    try:
        a.wait_ready()
        b.wait_ready()
        yield {"a": a, "b": b, "redis": redis_server}
    finally:
        a.stop()
        b.stop()
        redis_server.stop()
