"""bench/results/latest.json, the Markdown summary and the PNG plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import peer_report
from bench.pools import table

RESULTS = Path(__file__).resolve().parent / "results"

TARGETS = [
    # (id, label, unit, limit, higher_is_better)
    ("ttft_p50_c50", "added TTFT p50 at concurrency 50", "ms", 2.0, False),
    ("ttft_p99_c50", "added TTFT p99 at concurrency 50", "ms", 10.0, False),
    ("cpu_default", "gateway CPU per 1,000 upstream events, coalescing 50 ms", "ms", 60.0, False),
    ("max_streams", "concurrent paced streams, no lost frame, added gap p99 < 10 ms", "streams", 1000, True),
    ("rss_per_stream", "gateway RSS per stream at 1,000 concurrent streams", "KB", 64.0, False),
    ("slow_reader", "gateway RSS growth, 1 KB/s reader on a 5 MB stream", "MB", 16.0, False),
    ("cancel_p99", "cancellation p99 (client gone → upstream closed)", "ms", 50.0, False),
    ("agent_door_ratio", "Messages door CPU per Claude Code-sized turn ÷ /v1/stream", "×", 1.2, False),
    # Issue 28 (pools, bench/pools.py)
    ("pool_cpu_overhead", "pool of three: gateway CPU per turn over a single provider", "%", 5.0, False),
    ("pool_p99_ratio", "lowest-latency ÷ weighted p99 TTFT, one of three deployments slow", "×", 1.0, False),
    (
        "pool_cache_share",
        "cache-read share, turns 2..10 of 10, pool of three, with a conversation key",
        "%",
        70.0,
        True,
    ),
]

# Issue 14 (the cost of a turn, memory per stream, two workers): (id, label, unit, limit, higher_is_better, before)
ISSUE_TARGETS = [
    ("turn_cpu_c50", "gateway CPU per short turn (5 unpaced deltas, ledger on), c=50", "ms", 1.5, False, 2.6),
    ("turn_cpu_c1", "gateway CPU per short turn, c=1", "ms", 2.0, False, 4.8),
    ("turn_ttft_c1", "added time to first delta, short turn, c=1, p50", "ms", 1.0, False, 5.5),
    ("ttft_p50_c1", "added TTFT, paced stream, c=1, p50", "ms", 1.0, False, 2.2),
    ("ttft_p50_c50", "added TTFT, paced stream, c=50, p50", "ms", 2.0, False, 4.6),
    ("ttft_p99_c50", "added TTFT, paced stream, c=50, p99", "ms", 5.0, False, 10.3),
    ("turns_per_s", "short turns per second, one worker, c=50", "turns/s", 500, True, 320),
    ("turns_per_s_2w", "short turns per second, two workers, c=50", "turns/s", 1000, True, None),
    ("max_streams", "paced streams (64 × 20 ms), no lost frame, added gap p99 < 10 ms", "streams", 400, True, 100),
    ("rss_per_stream", "RSS per open stream at 1,000 streams", "KB", 32.0, False, 91),
    ("workers_ratio", "GATEWAY_WORKERS=2: short turns/s ÷ one worker (canned upstream)", "×", 1.8, True, None),
]


def figures(results: dict[str, Any]) -> dict[str, float | None]:
    got: dict[str, float | None] = {}
    for level in results.get("ttft", {}).get("levels", []):
        if level["concurrency"] == 1:
            got["ttft_p50_c1"] = level["added"]["ttftP50Ms"]
    turns = results.get("turns", {})
    for level in turns.get("levels", []) if turns.get("workers", 1) == 1 else []:
        if level["concurrency"] == 50:
            got["turn_cpu_c50"] = level["gatewayCpuMsPerTurn"]
            got["turns_per_s"] = level["gatewayTurnsPerS"]
        if level["concurrency"] == 1:
            got["turn_cpu_c1"] = level["gatewayCpuMsPerTurn"]
            got["turn_ttft_c1"] = level["added"]["ttftP50Ms"]
    runs = results.get("workers", {}).get("runs", {})
    if "1" in runs:
        got.setdefault("turns_per_s", runs["1"]["turns"]["gatewayTurnsPerS"])
        got.setdefault("turn_cpu_c50", runs["1"]["turns"]["gatewayCpuMsPerTurn"])
    if "2" in runs:
        got["turns_per_s_2w"] = runs["2"]["turns"]["gatewayTurnsPerS"]
    if "workers" in results:
        got["workers_ratio"] = results["workers"]["turnsPerSRatio"]
    for level in results.get("ttft", {}).get("levels", []):
        if level["concurrency"] == 50:
            got["ttft_p50_c50"] = level["added"]["ttftP50Ms"]
            got["ttft_p99_c50"] = level["added"]["ttftP99Ms"]
    if "cpu" in results:
        got["cpu_default"] = results["cpu"]["default"]["gatewayCpuMsPer1k"]
        got["cpu_off"] = results["cpu"]["off"]["gatewayCpuMsPer1k"]
    if "concurrency" in results:
        got["max_streams"] = results["concurrency"]["maxSustained"]
        got["rss_per_stream"] = results["concurrency"]["rss"]["gateway"]["kbPerStream"]
    if "rss" in results and "rss_per_stream" not in got:  # `python -m bench rss` alone
        got["rss_per_stream"] = results["rss"]["gateway"]["kbPerStream"]
    if "slowReader" in results:
        got["slow_reader"] = results["slowReader"]["gateway"]["rssGrowthMB"]
    if "cancel" in results:
        got["cancel_p99"] = results["cancel"]["gateway"]["p99Ms"]
    if "pools" in results:
        got["pool_cpu_overhead"] = results["pools"]["poolCpuOverheadPct"]
        got["pool_p99_ratio"] = results["pools"]["lowestLatencyP99Ratio"]
        got["pool_cache_share"] = round(results["pools"]["cache"]["shareWithKey"] * 100, 1)
    if "agentDoors" in results:
        got["agent_door_ratio"] = results["agentDoors"]["doors"]["anthropic-messages"]["cpuRatioToUnified"]
    return got


def _row(got: dict[str, float | None], key: str, label: str, unit: str, limit: float, higher: bool) -> dict[str, Any]:
    value = got.get(key)
    met = None if value is None else (value >= limit if higher else value <= limit)
    return {"id": key, "label": label, "unit": unit, "target": limit, "higher": higher, "value": value, "met": met}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    got = figures(results)
    return [_row(got, *target) for target in TARGETS]


def issue_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of issue 14's target table, each with the figure the issue started from."""
    got = figures(results)
    return [
        {**_row(got, key, label, unit, limit, higher), "before": before}
        for key, label, unit, limit, higher, before in ISSUE_TARGETS
    ]


def write(results: dict[str, Any], name: str = "latest") -> list[Path]:
    RESULTS.mkdir(exist_ok=True)
    results["targets"] = targets(results)
    results["issueTargets"] = issue_targets(results)
    json_path = RESULTS / f"{name}.json"
    json_path.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    md_path = RESULTS / ("summary.md" if name == "latest" else f"{name}.md")
    md_path.write_text(markdown(results))
    paths = [json_path, md_path]
    png = plot(results, RESULTS / f"{name}.png")
    if png:
        paths.append(png)
    return paths


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        value = f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return f"{value} {unit}".strip()


def markdown(results: dict[str, Any]) -> str:
    meta = results.get("meta", {})
    lines = [
        "# Gateway benchmark: latest run",
        "",
        f"Run {meta.get('finishedAt', '?')} on {meta.get('cpus', '?')} CPUs, {'quick' if meta.get('quick') else 'full'} mode, "
        f"{meta.get('durationS', '?')} s. Every figure is gateway path minus (or over) direct path, measured in the "
        "same process with interleaved rounds; medians over rounds. See bench/README.md.",
        "",
        "| target | value | limit | met |",
        "|---|---|---|---|",
    ]
    for row in results.get("targets", []):
        op = "≥" if row.get("higher") else "≤"
        met = {True: "yes", False: "**no**", None: "not run"}[row["met"]]
        lines.append(
            f"| {row['label']} | {_fmt(row['value'], row['unit'])} | {op} {row['target']} {row['unit']} | {met} |"
        )
    if results.get("issueTargets"):
        lines += [
            "",
            "### Issue 14 targets (one worker unless said; `before` is the figure the issue started from)",
            "",
            "| figure | before | value | target | met |",
            "|---|---|---|---|---|",
        ]
        for row in results["issueTargets"]:
            op = "≥" if row["higher"] else "≤"
            met = {True: "yes", False: "**no**", None: "not run"}[row["met"]]
            lines.append(
                f"| {row['label']} | {_fmt(row['before'], row['unit'])} | {_fmt(row['value'], row['unit'])} | "
                f"{op} {row['target']} {row['unit']} | {met} |"
            )
    if "coldStart" in results:
        c = results["coldStart"]
        lines += [
            "",
            f"## 0. Cold start to the first streamed turn (`{c['scenario']}`, {c['rounds']} rounds, a fresh process "
            "each; the simulator's own cold start is the yardstick)",
            "",
            "| process | start to first turn done | first turn's TTFT | warm TTFT | first turn's extra TTFT | idle RSS |",
            "|---|---|---|---|---|---|",
        ]
        for name, label in (("gateway", "gateway"), ("direct", "simulator (direct)")):
            x = c[name]
            lines.append(
                f"| {label} | {_fmt(x['firstTurnS'], 's')} | {_fmt(x['firstTtftMs'], 'ms')} | "
                f"{_fmt(x['warmTtftMs'], 'ms')} | {_fmt(x['firstTurnExtraTtftMs'], 'ms')} | {_fmt(x['idleRssMiB'], 'MiB')} |"
            )
        lines.append(f"\nGateway ÷ simulator, start to first turn done: {_fmt(c['ratioToBare'])}×.")
        g = c["gateway"]
        if "readyzS" in g:  # the first turn sent once /readyz answers, and what the start cost in CPU
            lines.append(
                f"Gateway: `/healthz` at {_fmt(g['healthzS'], 's')} ({_fmt(g['healthzCpuS'], 's')} CPU), `/readyz` at "
                f"{_fmt(g['readyzS'], 's')} ({_fmt(g['readyzCpuS'], 's')} CPU); a first turn sent once `/readyz` answers "
                f"is done at {_fmt(g['readyFirstTurnS'], 's')}, its TTFT {_fmt(g['readyFirstTtftMs'], 'ms')}."
            )
    if "ttft" in results:
        lines += [
            "",
            "## 1. Added time to first token and inter-frame gap (paced 64 × 20 ms, coalescing off)",
            "",
            "| concurrency | added TTFT p50 | p99 | added gap p50 | p99 | TTFT ratio p50 | direct gap p99 | lost frames | gateway CPU share | load generator CPU share |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for lv in results["ttft"]["levels"]:
            a, r = lv["added"], lv["ratio"]
            lines.append(
                f"| {lv['concurrency']} | {_fmt(a['ttftP50Ms'], 'ms')} | {_fmt(a['ttftP99Ms'], 'ms')} | "
                f"{_fmt(a['gapP50Ms'], 'ms')} | {_fmt(a['gapP99Ms'], 'ms')} | {_fmt(r['ttftP50Ms'])}× | "
                f"{_fmt(lv['directGapP99Ms'], 'ms')} | {lv['lostFrames']} | {_fmt(lv['gatewayCpuShare'])} | {_fmt(lv['loadgenCpuShare'])} |"
            )
    if "cpu" in results:
        c = results["cpu"]
        lines += [
            "",
            f"## 2. Gateway CPU per 1,000 upstream events (unpaced, {c['streamsPerRound']} × {c['eventsPerStream']} events)",
            "",
            "| coalescing | gateway CPU ms / 1k events | simulator CPU ms / 1k | gateway ÷ simulator | events/s via gateway | direct | throughput ratio | frames per stream |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for label in ("default", "off"):
            x = c[label]
            lines.append(
                f"| {label} ({x['throttleMs']}) | {_fmt(x['gatewayCpuMsPer1k'])} | {_fmt(x['simulatorCpuMsPer1k'])} | "
                f"{_fmt(x['gatewayOverSimulatorCpu'])}× | {x['gatewayEventsPerS']} | {x['directEventsPerS']} | "
                f"{_fmt(x['throughputRatio'])} | {_fmt(x['framesPerStream'])} |"
            )
    if "cpuApis" in results:
        c = results["cpuApis"]
        lines += [
            "",
            f"## 2b. Gateway CPU per 1,000 upstream events, per api (same run, {c['streamsPerRound']} streams of `{c['scenario']}`, coalescing at the default)",
            "",
            "| api | provider | upstream events per stream | gateway CPU ms / 1k upstream events | gateway CPU ms / 1k text deltas | lost frames |",
            "|---|---|---|---|---|---|",
        ]
        for api, x in c["apis"].items():
            lines.append(
                f"| {api} | {x['provider']} | {_fmt(x['upstreamEventsPerStream'])} | {_fmt(x['gatewayCpuMsPer1k'])} | "
                f"{_fmt(x['gatewayCpuMsPer1kDeltas'])} | {x['lostFrames']} |"
            )
    if "doors" in results:
        c = results["doors"]
        lines += [
            "",
            f"## 2c. Doors against /v1/stream (same run, {c['rounds']} interleaved rounds; CPU on {c['streamsPerRound']} streams of `{c['unpaced']}`, TTFT on {c['ttftPairs']} pairs of `{c['paced']}` one at a time; coalescing at the default)",
            "",
            "| door | gateway CPU ms / 1k upstream events | × /v1/stream (median of rounds) | TTFT p50 ms | added TTFT ms (median of pair differences) | lost frames | failed |",
            "|---|---|---|---|---|---|---|",
        ]
        for door, x in c["doors"].items():
            lines.append(
                f"| {door} | {_fmt(x['gatewayCpuMsPer1k'])} | {_fmt(x['cpuRatioToUnified'])}× | {_fmt(x['ttftP50Ms'])} | "
                f"{_fmt(x['addedTtftMs'])} | {x['lostFrames']} | {x['failedStreams']} |"
            )
    if "agentDoors" in results:
        c = results["agentDoors"]
        lines += [
            "",
            f"## 2c'. A coding agent's turn through the Messages door against /v1/stream (same run, {c['rounds']} interleaved rounds of {c['turnsPerRound']} turns, {c['parallel']} at a time; {c['systemBytes']:,}-byte system prompt, {c['tools']} tools, `{c['scenario']}` from Anthropic)",
            "",
            "| door | gateway CPU ms / turn | × /v1/stream (median of rounds) | failed |",
            "|---|---|---|---|",
        ]
        for door, x in c["doors"].items():
            lines.append(
                f"| {door} | {_fmt(x['gatewayCpuMsPerTurn'])} | {_fmt(x['cpuRatioToUnified'])}× | {x['failedTurns']} |"
            )
    if "turns" in results:
        t = results["turns"]
        lines += [
            "",
            f"## 2d. Short turns per second (`{t['scenario']}`, clients back to back for {t['secondsPerRound']:g} s a round, "
            f"{t['workers']} worker(s), ledger on)",
            "",
            "| concurrency | turns/s via gateway | direct | gateway CPU ms / turn | added TTFT p50 | p99 | failed | gateway CPU share | load generator CPU share |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for lv in t["levels"]:
            lines.append(
                f"| {lv['concurrency']} | {_fmt(lv['gatewayTurnsPerS'])} | {_fmt(lv['directTurnsPerS'])} | "
                f"{_fmt(lv['gatewayCpuMsPerTurn'], 'ms')} | {_fmt(lv['added']['ttftP50Ms'], 'ms')} | "
                f"{_fmt(lv['added']['ttftP99Ms'], 'ms')} | {lv['failedStreams']} | {_fmt(lv['gatewayCpuShare'])} | "
                f"{_fmt(lv['loadgenCpuShare'])} |"
            )
    if "idle" in results:
        i = results["idle"]
        lines += [
            "",
            f"## 2e. Added TTFT after idle time ({i['pairs']} pairs one at a time; short `{i['scenarios']['short']}`, "
            f"paced `{i['scenarios']['paced']}`)",
            "",
            "| idle after each turn | short: added TTFT | direct TTFT p50 | paced: added TTFT | direct TTFT p50 |",
            "|---|---|---|---|---|",
        ]
        for lv in i["levels"]:
            short, paced_ = lv["short"], lv["paced"]
            lines.append(
                f"| {lv['pauseMs']:g} ms | {_fmt(short['addedTtftMs'], 'ms')} | {_fmt(short['directTtftP50Ms'], 'ms')} | "
                f"{_fmt(paced_['addedTtftMs'], 'ms')} | {_fmt(paced_['directTtftP50Ms'], 'ms')} |"
            )
    if "concurrency" in results:
        c = results["concurrency"]
        lines += [
            "",
            f"## 3. Concurrent paced streams (max sustained: {c['maxSustained']}; a level counts while every level up "
            "to it passed and the direct path's own gap p99 stayed within 10 ms of its 20 ms pacing)",
            "",
            "| concurrency | passed | added gap p99 | direct gap p99 | added TTFT p50 | lost frames | failed | gateway CPU share | load generator CPU share |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for lv in c["levels"]:
            lines.append(
                f"| {lv['concurrency']} | {'yes' if lv['passed'] else 'no'} | {_fmt(lv['added']['gapP99Ms'], 'ms')} | "
                f"{_fmt(lv['directGapP99Ms'], 'ms')} | {_fmt(lv['added']['ttftP50Ms'], 'ms')} | {lv['lostFrames']} | "
                f"{lv['failedStreams']} | {_fmt(lv['gatewayCpuShare'])} | {_fmt(lv['loadgenCpuShare'])} |"
            )
        rss = c["rss"]
        g, d = rss["gateway"], rss["direct"]
        lines += [
            "",
            f"RSS at {rss['streams']} open streams: gateway {g['kbPerStream']} KB/stream "
            f"(idle {g['idleRssMB']} MB → {g['rssAllOpenMB']} MB, peak {g['peakRssMB']} MB, {g['failed']} failed); "
            f"simulator (direct path, for scale) {d['kbPerStream']} KB/stream.",
        ]
    if "slowReader" in results:
        s = results["slowReader"]
        g, d = s["gateway"], s["direct"]
        lines += [
            "",
            "## 4. Slow reader (1 KB/s, 5 MB unpaced stream)",
            "",
            f"Over {s['seconds']:g} s: gateway RSS growth {g['rssGrowthMB']} MB; the simulator sent {g['simulatorFramesSent']} of "
            f"{s['streamBytes'] // 256 + 6} frames through the gateway (direct: {d['simulatorFramesSent']}, simulator RSS growth "
            f"{d['rssGrowthMB']} MB); upstream closed after the reader left: {g['upstreamClosed']}.",
        ]
    if "cancel" in results:
        c = results["cancel"]
        lines += [
            "",
            f"## 5. Cancellation ({c['cancels']} cancels at random points)",
            "",
            f"Client close → simulator sees the upstream closed: gateway p50 {c['gateway']['p50Ms']} ms, p99 {c['gateway']['p99Ms']} ms "
            f"(direct p50 {c['direct']['p50Ms']} ms, p99 {c['direct']['p99Ms']} ms; added p99 {c['added']['p99Ms']} ms); "
            f"missed {c['gateway']['missed']}.",
        ]
    if "ledger" in results:
        lines += ["", "## 6. Ledger on", ""]
        led = results["ledger"]
        if "postgresql" in led and isinstance(led["postgresql"], str):
            lines.append(f"- postgresql: {led['postgresql']}")
        for name, entry in led["backends"].items():
            if not entry.get("ledgerActive"):
                lines.append(f"- {name}: {entry.get('note')}")
                continue
            ttfts = ", ".join(
                f"c={lv['concurrency']}: +{_fmt(lv['added']['ttftP50Ms'])}/+{_fmt(lv['added']['ttftP99Ms'])} ms"
                for lv in entry["ttft"]["levels"]
            )
            paced_levels = ", ".join(
                f"{lv['concurrency']} {'passed' if lv['passed'] else 'failed'} (added gap p99 "
                f"{_fmt(lv['added']['gapP99Ms'], 'ms')}, direct {_fmt(lv['directGapP99Ms'], 'ms')})"
                for lv in entry["concurrency"]["levels"]
            )
            lines.append(f"- {name}: added TTFT p50/p99 {ttfts}; paced streams {paced_levels}")
    if "workers" in results:
        w = results["workers"]
        lines += [
            "",
            "## 7. One worker against two (`python -m app`, `GATEWAY_WORKERS=1` and `=2`, bench/workers.py)",
            "",
            f"{w['scenario']}; medians of {len(w['rounds'])} rounds of {w['secondsPerRound']} s, the two alternating.",
            "",
            "| workers | short turns/s | gateway CPU ms / turn | gateway cores used | turns per gateway CPU-second "
            "| cores the rest of the machine took | failed turns |",
            "|---|---|---|---|---|---|---|",
        ]
        for run in w["runs"].values():
            t = run["turns"]
            lines.append(
                f"| {run['workers']} | {_fmt(t['gatewayTurnsPerS'])} | {_fmt(t['gatewayCpuMsPerTurn'], 'ms')} | "
                f"{_fmt(t['gatewayCores'])} | {_fmt(t['turnsPerGatewayCoreS'])} | {_fmt(t['otherCores'])} | "
                f"{t['failedStreams']} |"
            )
        lines.append(f"\nTwo workers ÷ one (median of the rounds' paired ratios): {_fmt(w['turnsPerSRatio'])}×.")
    if "pools" in results:
        lines += [
            "",
            "## 8. Pools (bench/pools.py: a pool of three against one provider, lowest-latency against weighted, "
            "sticky conversations and the prompt cache)",
            "",
            *table(results["pools"]),
        ]
    if "peers" in results:
        lines += [
            "",
            "## 9. Beside Portkey (bench/peer_bench.py: the same simulator upstream, each server alone on CPU 1, "
            "coalescing off)",
            "",
            *peer_report.table(results["peers"]),
        ]
    lines += _history(results.get("history"))
    if "meta" in results and results["meta"].get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in results["meta"]["notes"]]
    return "\n".join(lines) + "\n"


def _history(history: dict[str, Any] | None) -> list[str]:
    """Each figure beside the last committed run's (bench/history.py)."""
    if not history or not history["rows"]:
        return []
    found = history["committed"]
    where = (
        f"finished {found.get('finishedAt') or '?'}, commit {found.get('commit') or 'not recorded'}"
        if found
        else "none found"
    )
    lines = [
        "",
        f"## Beside the last committed run ({where})",
        "",
        "Ratios and added figures compare across hosts; absolute ones only on the same host. A change of more than "
        "10 % in the worse direction is marked.",
        "",
        "| figure | committed | this run | this ÷ committed |",
        "|---|---|---|---|",
    ]
    for row in history["rows"]:
        change = "–" if row["change"] is None else f"{row['change']:.2f}×" + (" **worse**" if row["worse"] else "")
        lines.append(
            f"| {row['label']} | {_fmt(row['committed'], row['unit'])} | {_fmt(row['value'], row['unit'])} | {change} |"
        )
    return lines


def plot(results: dict[str, Any], path: Path) -> Path | None:
    series: dict[str, dict[int, dict[str, float | None]]] = {"default settings": {}}
    for lv in results.get("ttft", {}).get("levels", []) + results.get("concurrency", {}).get("levels", []):
        series["default settings"].setdefault(lv["concurrency"], lv["added"])
    for name, entry in results.get("ledger", {}).get("backends", {}).items():
        if entry.get("ledgerActive"):
            s = series.setdefault(f"ledger {name}", {})
            for lv in entry["ttft"]["levels"] + entry["concurrency"]["levels"]:
                s.setdefault(lv["concurrency"], lv["added"])
    if not series["default settings"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = [
        ("added time to first token", ("ttftP50Ms", "ttftP99Ms"), 10.0),
        ("added inter-frame gap", ("gapP50Ms", "gapP99Ms"), 10.0),
    ]
    for ax, (title, keys, limit) in zip(axes, panels):
        for name, points in series.items():
            xs = sorted(points)
            for key, style in zip(keys, ("-o", "--s")):
                ys = [points[x].get(key) for x in xs]
                pairs = [(x, y) for x, y in zip(xs, ys) if y is not None]
                if pairs:
                    ax.plot(
                        [p[0] for p in pairs], [max(p[1], 0.01) for p in pairs], style, label=f"{name} {key[-5:-2]}"
                    )
        ax.axhline(limit, color="grey", linestyle=":", label=f"{limit:g} ms target (p99)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("concurrent paced streams (64 deltas × 20 ms)")
        ax.set_ylabel("gateway − direct, ms")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
