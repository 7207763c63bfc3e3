"""Which gateway processes are alive, for both stores: the rule that decides whose open records are
`interrupted`.

Each gateway process has an instance id, stored on its records, and a row in `gateway_instances` whose
`heartbeat_at` it refreshes every `GATEWAY_LEDGER_HEARTBEAT_S`. Once the process serves (after its port is
bound, see `app.main`), and then on every heartbeat, it marks `interrupted` the open records
(`outcome IS NULL`) of

1. instances whose heartbeat is older than `GATEWAY_LEDGER_INSTANCE_STALE_S`;
2. instances with no `gateway_instances` row (a process deletes its row when it closes cleanly);
3. earlier instances on this same host (same host name, boot id and pid namespace) whose process is gone:
   its pid no longer exists or is a zombie, or it is this process's own pid (a restarted container) but not
   an instance of this process;

and deletes the rows of those instances. A live process's in-flight records are never marked: it has a
fresh heartbeat, a row, and (on the same host) a running process. Should a process stall past the stale
limit and then recover, its own completion overwrites the `interrupted` mark and its heartbeat re-creates
its row. The same rule holds for PostgreSQL (several replicas) and SQLite (several processes on one file:
a second `make run`, or `GATEWAY_WORKERS=2`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from app.ledger.base import PROCESS_INSTANCES

log = logging.getLogger("gateway.ledger")


def host_identity() -> str:
    """Host name, boot id and pid namespace: two processes with equal identities can see each other's pids."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    except OSError:
        parts.append("")
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        parts.append("")
    return "|".join(parts)


def local_process_gone(instance_id: str, pid: int) -> bool:
    """True when an instance of this host certainly no longer runs (rule 3)."""
    if pid == os.getpid():
        return instance_id not in PROCESS_INSTANCES
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] == "Z"
    except (OSError, ValueError, IndexError):
        return False


@dataclass(frozen=True)
class InstanceRow:
    """Another instance's `gateway_instances` row, as a store reads it."""

    instance_id: str
    host: str
    pid: int
    stale: bool  # its heartbeat is older than the stale limit


def dead_instances(rows: Iterable[InstanceRow], host: str) -> list[str]:
    """The instances among `rows` that are gone (rules 1 and 3); rule 2 is the stores' SQL."""
    return [r.instance_id for r in rows if r.stale or (r.host == host and local_process_gone(r.instance_id, r.pid))]


async def heartbeat_forever(interval: float, tick: Callable[[], Awaitable[None]]) -> None:
    """Call `tick` every `interval` seconds until cancelled; a failed tick is logged and retried next time."""
    while True:
        await asyncio.sleep(interval)
        try:
            await tick()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("ledger heartbeat failed: %s", type(exc).__name__)


def log_marked(marked: int) -> None:
    if marked:
        log.warning("marked %d request records interrupted (their gateway process is gone)", marked)
