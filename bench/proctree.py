"""CPU time and resident memory of a process and all its descendants, read from /proc (Linux).

A server measured side by side with another (bench/peer_bench.py) may be one process (uvicorn, one worker) or
several (Node's runtime is one process with threads, but a wrapper could fork): summing over the tree counts
whatever the server runs. `/proc/<pid>/stat` carries, after the command name in parentheses (which may itself
hold spaces and parentheses), the parent pid (field 4), user and system CPU in clock ticks (fields 14 and 15,
all threads included) and the resident set in pages (field 24).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcStat:
    """The figures of one `/proc/<pid>/stat` line this module uses."""

    pid: int
    ppid: int
    cpu_ticks: int  # utime + stime
    rss_pages: int


def parse_stat(line: str) -> ProcStat:
    """One `/proc/<pid>/stat` line. The command name ends at the *last* `)` of the line."""
    pid_text, rest = line.split(" (", 1)
    fields = rest[rest.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): field k of proc(5) is fields[k - 3]
    return ProcStat(
        pid=int(pid_text),
        ppid=int(fields[1]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
        rss_pages=int(fields[21]),
    )


def tree(root: int, stats: list[ProcStat]) -> list[ProcStat]:
    """`root`'s entry and its descendants' among `stats` (empty when `root` is not among them)."""
    children: dict[int, list[ProcStat]] = {}
    by_pid = {}
    for stat in stats:
        children.setdefault(stat.ppid, []).append(stat)
        by_pid[stat.pid] = stat
    if root not in by_pid:
        return []
    found, queue = [], [by_pid[root]]
    while queue:
        stat = queue.pop()
        found.append(stat)
        queue += children.get(stat.pid, [])
    return found


def _all_stats() -> list[ProcStat]:
    stats = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stats.append(parse_stat((entry / "stat").read_text()))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not readable
            continue
    return stats


def snapshot(root: int) -> list[ProcStat]:
    """The process tree under `root` now."""
    return tree(root, _all_stats())


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of `root` and its living descendants."""
    return sum(s.cpu_ticks for s in snapshot(root)) / CLOCK_TICKS


def rss_bytes(root: int) -> int:
    """Resident memory of `root` and its descendants (shared pages counted in each process)."""
    return sum(s.rss_pages for s in snapshot(root)) * PAGE_SIZE
