"""The table of `python -m bench peers` (bench/peer_bench.py): this gateway beside Portkey, figure by figure,
and the Markdown of bench/results/peers.md (also section 9 of a full run's summary)."""

from __future__ import annotations

from typing import Any

# The ways through, as the table's columns: the simulator itself, this gateway's Chat Completions door and its
# /v1/stream, and Portkey's /v1/chat/completions.
SUBJECTS = ("direct", "gateway-chat", "gateway-stream", "portkey")
GATEWAY_SUBJECTS = ("gateway-chat", "gateway-stream")


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side table: one row per figure, each gateway way and Portkey, and gateway ÷ Portkey (the
    per-round median for CPU, else the ratio of the medians)."""
    out = []
    for key, label in (("c1", "c=1"), ("c50", "c=50")):
        lvl = result["long"][key]
        out.append(_row(f"CPU per 1,000 upstream events, {label} (ms)", lvl, "cpuMsPer1k"))
    for key, label in (("c1", "c=1"), ("c20", "c=20")):
        lvl = result["short"][key]
        out.append(_row(f"CPU per short turn (5 deltas), {label} (ms)", lvl, "cpuMsPerTurn"))
    short1 = result["short"]["c1"]
    out.append(
        {
            "figure": "added time to first text, short turn, c=1 (ms)",
            "gateway-chat": short1["gateway-chat"]["addedTtftMs"],
            "gateway-stream": short1["gateway-stream"]["addedTtftMs"],
            "portkey": short1["portkey"]["addedTtftMs"],
            "ratio-chat": ratio(short1["gateway-chat"]["addedTtftMs"], short1["portkey"]["addedTtftMs"]),
            "ratio-stream": ratio(short1["gateway-stream"]["addedTtftMs"], short1["portkey"]["addedTtftMs"]),
        }
    )
    cold = result["coldStart"]
    for key, label in (
        ("healthS", "cold start to the first 200 of the health route (s)"),
        ("firstTurnS", "cold start to the first streamed turn done (s)"),
        ("idleRssMiB", "idle RSS, process tree (MiB)"),
    ):
        out.append(_process_row(label, cold["gateway-chat"][key], cold["portkey"][key]))
    c50 = result["long"]["c50"]
    out.append(
        _process_row(
            "peak RSS during c=50 (MiB)",
            max(c50["gateway-chat"]["peakRssMiB"], c50["gateway-stream"]["peakRssMiB"]),
            c50["portkey"]["peakRssMiB"],
        )
    )
    opened = result["openStreams"]
    out.append(
        _process_row(
            f"RSS per open stream, {opened['portkey']['streams']:,} paced streams (KB)",
            opened["gateway-chat"]["kbPerStream"],
            opened["portkey"]["kbPerStream"],
        )
    )
    return out


def _row(label: str, lvl: dict[str, Any], key: str) -> dict[str, Any]:
    return {
        "figure": label,
        "direct": lvl["direct"][key],
        "gateway-chat": lvl["gateway-chat"][key],
        "gateway-stream": lvl["gateway-stream"][key],
        "portkey": lvl["portkey"][key],
        "ratio-chat": lvl["overPortkey"]["gateway-chat"][key],
        "ratio-stream": lvl["overPortkey"]["gateway-stream"][key],
    }


def _process_row(label: str, gateway: float | None, portkey: float | None) -> dict[str, Any]:
    """A figure of the gateway's process (both of its ways are the same process)."""
    return {"figure": label, "gateway-chat": gateway, "gateway-stream": None, "portkey": portkey,
            "ratio-chat": ratio(gateway, portkey), "ratio-stream": None, "process": True}  # fmt: skip


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    return (
        f"{value:.2f}"
        if isinstance(value, float) and abs(value) < 100
        else f"{value:,.0f}"
        if isinstance(value, float)
        else str(value)
    )


def table(result: dict[str, Any]) -> list[str]:
    """The Markdown table of `rows` (also in the summary of a full `make bench` run)."""
    if "skipped" in result:
        return [f"Skipped: {result['skipped']}."]
    lines = [
        "| figure | gateway, Chat Completions door | gateway, /v1/stream | Portkey "
        f"{result['portkeyVersion']} | direct (simulator) | gateway ÷ Portkey (door / stream) |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["table"]:
        stream_cell = "(same process)" if row.get("process") else _fmt(row["gateway-stream"])
        ratios = _fmt(row["ratio-chat"]) + ("" if row.get("process") else f" / {_fmt(row['ratio-stream'])}")
        lines.append(
            f"| {row['figure']} | {_fmt(row['gateway-chat'])} | {stream_cell} | {_fmt(row['portkey'])} | "
            f"{_fmt(row.get('direct'))} | {ratios} |"
        )
    return lines


def markdown(result: dict[str, Any]) -> str:
    load = result["loadAverage1m"]
    frames = {name: result["long"]["c50"][name]["framesPerStream"] for name in SUBJECTS}
    failed = {
        name: sum(result[kind][lvl][name]["failed"] for kind, lvl in
                  (("long", "c1"), ("long", "c50"), ("short", "c1"), ("short", "c20")))
        for name in SUBJECTS
    }  # fmt: skip
    return "\n".join(
        [
            "# This gateway beside Portkey (issue 42)",
            "",
            f"`python -m bench peers{' --quick' if result['quick'] else ''}` (bench/peer_bench.py). Portkey "
            f"{result['portkeyVersion']} on Node {result['node']}; servers pinned `{result['pinned']['servers']}`, "
            f"simulator and load generator `{result['pinned']['simulatorAndLoadGenerator']}`; gateway coalescing "
            f"{result['gatewayCoalescing']}. Load average (1 min) {load['start']} at the start, {load['end']} at the "
            "end. Medians over interleaved rounds; CPU is user + system of the server's process tree.",
            "",
            *table(result),
            "",
            f"Text frames per stream of `{result['long']['scenario']}` at c=50: "
            + ", ".join(f"{name} {_fmt(value)}" for name, value in frames.items())
            + ". Failed streams: "
            + ", ".join(f"{name} {value}" for name, value in failed.items())
            + ".",
            "",
            "Portkey sleeps 25 ms before forwarding the first chunk of a stream: its added time to first text "
            "includes it.",
            "",
        ]
    )
