"""The simulator and the gateway as separate uvicorn processes (one worker each), measured with psutil."""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_fd_limit() -> None:
    """As many open files as allowed: a run holds 1,000 streams open (inherited by the servers it starts)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else hard
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


@dataclass
class Server:
    """One uvicorn process serving `app` on a free loopback port."""

    name: str
    app: str
    env: dict[str, str] = field(default_factory=dict)
    health: str = "/healthz"
    port: int = 0
    workers: int = 1  # uvicorn `--workers`; with more than one, metrics go to a multiprocess dir
    popen: subprocess.Popen | None = None
    proc: psutil.Process | None = None
    workdir: str = ""

    def start(self) -> "Server":
        return self.start_command(*self.uvicorn_command())

    def uvicorn_command(self) -> tuple[list[str], int, dict[str, str]]:
        """The command that serves `app` under uvicorn on a free port, the port, and its environment."""
        port = free_port()
        self.workdir = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        env = dict(self.env)
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            self.app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--log-level",
            "warning",
            "--no-access-log",
            "--backlog",
            "4096",
            "--timeout-keep-alive",
            "30",
        ]
        if self.workers > 1:
            cmd += ["--workers", str(self.workers)]
            metrics_dir = Path(self.workdir) / "metrics"
            metrics_dir.mkdir()
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        return cmd, port, env

    def start_command(self, cmd: list[str], port: int, env: dict[str, str]) -> "Server":
        """Run `cmd` (a server that will listen on `port`) and wait until `health` answers 200."""
        self.spawn(cmd, port, env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.popen is not None
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.stderr()[-2000:]}")
            try:
                if httpx.get(f"{self.url}{self.health}", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not start")

    def spawn(self, cmd: list[str], port: int, env: dict[str, str]) -> None:
        """Run `cmd` (a server that will listen on `port`), not waiting for it."""
        self.port = port
        self.workdir = self.workdir or tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        self.popen = subprocess.Popen(
            cmd,
            cwd=self.workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(Path(self.workdir) / "stderr.log", "wb"),
        )
        self.proc = psutil.Process(self.popen.pid)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr(self) -> str:
        try:
            return (Path(self.workdir) / "stderr.log").read_text(errors="replace")
        except OSError:
            return ""

    def processes(self) -> list[psutil.Process]:
        """The server process and, with several workers, its worker processes."""
        assert self.proc is not None
        if self.workers == 1:
            return [self.proc]
        try:
            return [self.proc, *self.proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            return [self.proc]

    def cpu(self) -> float:
        """CPU seconds (user + system) of the server and its workers."""
        total = 0.0
        for proc in self.processes():
            try:
                total += cpu_seconds(proc)
            except psutil.NoSuchProcess:
                pass
        return total

    def rss(self) -> int:
        """Resident memory of the server and its workers."""
        total = 0
        for proc in self.processes():
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def simulator() -> Server:
    return Server("simulator", "simulator.app:app", health="/_sim/requests?contains=healthcheck").start()


def gateway_env(sim: Server, database_url: str | None = None, **env: str) -> dict[str, str]:
    """The gateway's environment: every provider pointed at the simulator, no client keys."""
    settings = {
        "GATEWAY_ANTHROPIC_BASE_URL": f"{sim.url}/anthropic",
        "ANTHROPIC_API_KEY": "bench-key",
        # The other apis, for `cpu-apis` (the same simulator speaks every vendor's format).
        "GATEWAY_OPENAI_BASE_URL": f"{sim.url}/openai/v1",
        "OPENAI_API_KEY": "bench-key",
        "GATEWAY_GOOGLE_BASE_URL": f"{sim.url}/google",
        "GEMINI_API_KEY": "bench-key",
        "GATEWAY_COMPAT_BASE_URL": f"{sim.url}/compat/v1",
        "GATEWAY_API_KEYS": "",
        "GATEWAY_LOG_LEVEL": "warning",
        **env,
    }
    if database_url:
        settings["GATEWAY_DATABASE_URL"] = database_url
    return settings


def gateway(sim: Server, database_url: str | None = None, workers: int = 1, **env: str) -> Server:
    settings = gateway_env(sim, database_url, **env)
    return Server("gateway", "app.main:app", env=settings, health="/readyz", workers=workers).start()


class Sampler:
    """Samples a process's RSS every `interval` seconds while running; keeps the peak and the series."""

    def __init__(self, server: Server, interval: float = 0.05) -> None:
        self.server = server
        self.interval = interval
        self.peak = 0
        self.samples: list[tuple[float, int]] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        start = time.monotonic()
        while True:
            rss = self.server.rss()
            self.peak = max(self.peak, rss)
            self.samples.append((time.monotonic() - start, rss))
            await asyncio.sleep(self.interval)

    def __enter__(self) -> "Sampler":
        self.peak = self.server.rss()
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
