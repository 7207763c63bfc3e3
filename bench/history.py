"""This run's figures beside the last committed run's (issue 42 item 6: no silent regressions).

The last committed results are `bench/results/latest.json` as the repository's HEAD has it (`git show`), so a run
that has already overwritten the file on disk still compares with what was committed; outside a git checkout the
file on disk is read before the run writes it. Each figure is one that compares across hosts: a ratio to the
direct path or to the simulator from the same run, or an added (gateway − direct) figure, plus the few absolute
figures the targets are set in (CPU per turn, RSS per stream), marked as such.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from bench.report import RESULTS, figures

ROOT = RESULTS.parent.parent
COMMITTED = "bench/results/latest.json"

Extract = Callable[[dict[str, Any]], "float | None"]


def _level(results: dict[str, Any], scenario: str, concurrency: int) -> dict[str, Any] | None:
    if scenario == "turns" and results.get("turns", {}).get("workers", 1) != 1:
        return None
    for level in results.get(scenario, {}).get("levels", []):
        if level.get("concurrency") == concurrency:
            return dict(level)
    return None


def _ratio(gateway: Any, direct: Any) -> float | None:
    if not isinstance(gateway, (int, float)) or not isinstance(direct, (int, float)) or not direct:
        return None
    return round(gateway / direct, 3)


def _turns_ratio(results: dict[str, Any], concurrency: int) -> float | None:
    level = _level(results, "turns", concurrency)
    return None if level is None else _ratio(level.get("gatewayTurnsPerS"), level.get("directTurnsPerS"))


def _ttft_ratio(results: dict[str, Any], concurrency: int) -> float | None:
    level = _level(results, "ttft", concurrency)
    return None if level is None else level["ratio"]["ttftP50Ms"]


def _cpu_over_simulator(results: dict[str, Any], coalescing: str) -> float | None:
    entry = results.get("cpu", {}).get(coalescing)
    return None if entry is None else entry.get("gatewayOverSimulatorCpu")


def _api_ratio(results: dict[str, Any], api: str) -> float | None:
    apis = results.get("cpuApis", {}).get("apis", {})
    if api not in apis or "anthropic-messages" not in apis:
        return None
    return _ratio(apis[api]["gatewayCpuMsPer1k"], apis["anthropic-messages"]["gatewayCpuMsPer1k"])


def _cold_start(results: dict[str, Any], key: str) -> float | None:
    value = results.get("coldStart", {}).get(key)
    return value if isinstance(value, (int, float)) else None


def _over_portkey(results: dict[str, Any], kind: str, level: str, key: str) -> float | None:
    """The gateway's Chat Completions door ÷ Portkey in the `peers` scenario (bench/peer_bench.py)."""
    entry = results.get("peers", {}).get(kind, {}).get(level, {}).get("overPortkey", {}).get("gateway-chat", {})
    value = entry.get(key)
    return value if isinstance(value, (int, float)) else None


def _figure(key: str) -> Extract:
    return lambda results: figures(results).get(key)


# (id, label, unit, extract, higher_is_better)
HISTORY: list[tuple[str, str, str, Extract, bool]] = [
    ("ttft_ratio_c1", "TTFT gateway ÷ direct, paced, c=1, p50", "×", lambda r: _ttft_ratio(r, 1), False),
    ("ttft_ratio_c50", "TTFT gateway ÷ direct, paced, c=50, p50", "×", lambda r: _ttft_ratio(r, 50), False),
    ("ttft_p50_c1", "added TTFT, paced, c=1, p50", "ms", _figure("ttft_p50_c1"), False),
    ("ttft_p50_c50", "added TTFT, paced, c=50, p50", "ms", _figure("ttft_p50_c50"), False),
    ("cpu_sim_default", "gateway ÷ simulator CPU per event, coalescing 50 ms", "×", lambda r: _cpu_over_simulator(r, "default"), False),
    ("cpu_sim_off", "gateway ÷ simulator CPU per event, coalescing off", "×", lambda r: _cpu_over_simulator(r, "off"), False),
    ("gemini_over_anthropic", "Gemini adapter ÷ Anthropic adapter CPU per event", "×", lambda r: _api_ratio(r, "google-generative-ai"), False),
    ("responses_over_anthropic", "Responses adapter ÷ Anthropic adapter CPU per event", "×", lambda r: _api_ratio(r, "openai-responses"), False),
    ("turns_ratio_c1", "short turns/s gateway ÷ direct, c=1", "×", lambda r: _turns_ratio(r, 1), True),
    ("turns_ratio_c50", "short turns/s gateway ÷ direct, c=50", "×", lambda r: _turns_ratio(r, 50), True),
    ("turn_ttft_c1", "added time to first delta, short turn, c=1, p50", "ms", _figure("turn_ttft_c1"), False),
    ("turn_cpu_c1", "gateway CPU per short turn, c=1 (absolute)", "ms", _figure("turn_cpu_c1"), False),
    ("turn_cpu_c50", "gateway CPU per short turn, c=50 (absolute)", "ms", _figure("turn_cpu_c50"), False),
    ("max_streams", "paced streams sustained", "streams", _figure("max_streams"), True),
    ("rss_per_stream", "RSS per open stream at 1,000 streams (absolute)", "KB", _figure("rss_per_stream"), False),
    ("slow_reader", "RSS growth, slow reader (absolute)", "MB", _figure("slow_reader"), False),
    ("cancel_p99", "cancellation p99 (absolute)", "ms", _figure("cancel_p99"), False),
    ("workers_ratio", "two workers ÷ one, short turns/s (canned upstream)", "×", _figure("workers_ratio"), True),
    ("cold_start_ratio", "cold start to first streamed turn, gateway ÷ simulator", "×", lambda r: _cold_start(r, "ratioToBare"), False),
    ("cold_start_s", "cold start to first streamed turn (absolute)", "s", lambda r: _cold_start(r, "firstTurnS"), False),
    ("idle_rss", "idle RSS after start-up and six turns (absolute)", "MiB", lambda r: _cold_start(r, "idleRssMiB"), False),
    ("portkey_cpu_c1", "gateway ÷ Portkey CPU per upstream event, c=1", "×", lambda r: _over_portkey(r, "long", "c1", "cpuMsPer1k"), False),
    ("portkey_cpu_c50", "gateway ÷ Portkey CPU per upstream event, c=50", "×", lambda r: _over_portkey(r, "long", "c50", "cpuMsPer1k"), False),
    ("portkey_turn_cpu_c20", "gateway ÷ Portkey CPU per short turn, c=20", "×", lambda r: _over_portkey(r, "short", "c20", "cpuMsPerTurn"), False),
]  # fmt: skip


def committed_results(path: str = COMMITTED, root: Path = ROOT) -> dict[str, Any] | None:
    """The results file as HEAD has it; the file on disk when git cannot say; None when neither exists."""
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True, check=True, timeout=30
        ).stdout
        return dict(json.loads(shown))
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    try:
        return dict(json.loads((root / path).read_text()))
    except (OSError, ValueError):
        return None


def commit(root: Path = ROOT) -> str | None:
    """HEAD's short hash, with `+dirty` when the tree has changes (the figures then are not HEAD's)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, check=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "app", "simulator", "bench/*.py"],
            cwd=root,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def beside(results: dict[str, Any], committed: dict[str, Any] | None) -> dict[str, Any]:
    """One row per figure this run has: its value, the committed run's, and this ÷ committed (`change`); `worse`
    when the change is past 10 % in the wrong direction. Rendered by `bench.report.markdown`."""
    rows = []
    for key, label, unit, extract, higher in HISTORY:
        value = extract(results)
        if value is None:
            continue
        before = extract(committed) if committed else None
        change = _ratio(value, before) if before and before > 0 and value >= 0 else None
        worse = None if change is None else (change < 0.9 if higher else change > 1.1)
        rows.append(
            {
                "id": key,
                "label": label,
                "unit": unit,
                "value": value,
                "committed": before,
                "change": change,
                "worse": worse,
            }
        )
    meta = (committed or {}).get("meta", {})
    found = {"finishedAt": meta.get("finishedAt"), "commit": meta.get("commit")} if committed else None
    return {"committed": found, "rows": rows}
