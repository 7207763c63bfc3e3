"""`GATEWAY_WORKERS` > 1 under `python -m app`: uvicorn's own supervisor (`uvicorn.supervisors.Multiprocess`)
starts N worker processes that accept on one socket the supervisor binds, each importing `app.main:app`.

Prometheus metrics are then kept in files (`PROMETHEUS_MULTIPROC_DIR`, app/telemetry/metrics.py) so that
`/metrics` of any worker sums them all: a directory the operator names is emptied of earlier runs' files at
start (prometheus-client's rule), else a private temporary one is made and removed when the supervisor exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


@contextmanager
def metrics_directory() -> Iterator[Path]:
    """The workers' shared metrics directory, set in this process's environment (the workers inherit it)."""
    named = os.environ.get(MULTIPROC_VARIABLE) or os.environ.get(MULTIPROC_VARIABLE.lower())
    if named:
        directory = Path(named)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):  # an earlier run's values would be summed with this one's
            stale.unlink()
        os.environ[MULTIPROC_VARIABLE] = str(directory)
        yield directory
        return
    directory = Path(tempfile.mkdtemp(prefix="gateway-metrics-"))
    os.environ[MULTIPROC_VARIABLE] = str(directory)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def serve_workers(config: uvicorn.Config) -> int:
    """Serve `config` (an import string, `workers` > 1) with uvicorn's supervisor until it stops; the exit
    status: uvicorn's start-up failure (3) when a worker failed to start (the supervisor then stops them all),
    else 0."""
    with metrics_directory():
        socket = config.bind_socket()
        try:
            supervisor = Multiprocess(config, sockets=[socket])
            supervisor.run()
        finally:
            socket.close()
    failed = any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes)
    return STARTUP_FAILURE if failed else 0


def exit_with_supervisor() -> None:
    """In a worker of uvicorn's supervisor (`python -m app` or `uvicorn --workers N`): be sent SIGTERM (and so
    drain) when the supervisor dies, so that a supervisor killed with SIGKILL does not leave its workers serving
    on the port (Linux: `PR_SET_PDEATHSIG`; elsewhere nothing). Not a worker (no multiprocessing parent): nothing."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if not parent.is_alive():  # it died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)
