"""The bench's own arithmetic: chunked decoding, lost-frame counting, the comparison and the targets.

Run with `.venv/bin/python -m pytest bench/test_bench.py -q` (not part of `make test`: tests/ is the suite).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.client import Path as ClientPath, StreamResult, Target, _Chunked
from bench.peer_bench import over_portkey, portkey_headers
from bench.peer_report import _process_row, table
from bench.proctree import ProcStat, parse_stat, tree
from bench.report import targets
from bench.scenarios import expected_text, lost_frames, sustained
from bench.stats import compare
from bench.timeline import medians


def test_chunked_decoder_handles_chunks_split_anywhere() -> None:
    body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
    for cut in range(1, len(body)):
        decoder = _Chunked()
        out = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
        assert out == b"hello, world"
        assert decoder.done


def test_lost_frames_counts_missing_deltas_not_frames() -> None:
    expected = expected_text(10, 8)
    whole = StreamResult(text=[expected[:24], expected[24:]])  # coalesced into two frames: nothing lost
    assert lost_frames(whole, expected, 8) == 0
    missing_tail = StreamResult(text=[expected[:56]])
    assert lost_frames(missing_tail, expected, 8) == 3
    hole = StreamResult(text=[expected[:16], expected[24:]])  # delta 2 dropped: everything after it is off
    assert lost_frames(hole, expected, 8) == 8


def test_compare_takes_the_median_of_per_round_differences() -> None:
    rounds = [
        {"direct": {"x": 10.0}, "gateway": {"x": 11.0}},
        {"direct": {"x": 20.0}, "gateway": {"x": 30.0}},
        {"direct": {"x": 10.0}, "gateway": {"x": 12.0}},
    ]
    summary = compare(rounds, ["x"])
    assert summary["added"]["x"] == 2.0
    assert summary["ratio"]["x"] == 1.2


def test_targets_report_met_and_missing() -> None:
    results = {"cancel": {"gateway": {"p99Ms": 80.0}}}
    rows = {r["id"]: r for r in targets(results)}
    assert rows["cancel_p99"]["met"] is False
    assert rows["ttft_p50_c50"]["met"] is None


def test_issue_targets_read_the_turns_and_workers_scenarios() -> None:
    from bench.report import issue_targets, markdown

    level = {"gatewayCpuMsPerTurn": 1.2, "gatewayTurnsPerS": 600.0, "added": {"ttftP50Ms": 0.8}}
    workers_run = {"gatewayCores": 0.9, "turnsPerGatewayCoreS": 700.0, "otherCores": 0.5, "failedStreams": 0}
    results = {
        "turns": {
            "workers": 1,
            "scenario": "s",
            "secondsPerRound": 2.0,
            "levels": [{**level, "concurrency": 1, "gatewayCpuMsPerTurn": 2.5}, {**level, "concurrency": 50}],
        },
        "workers": {
            "turnsPerSRatio": 1.5,
            "scenario": "canned",
            "rounds": [{}, {}],
            "secondsPerRound": 6.0,
            "runs": {
                "1": {
                    "workers": 1,
                    "levels": [],
                    "maxSustained": 200,
                    "turns": {**workers_run, "gatewayTurnsPerS": 610.0, "gatewayCpuMsPerTurn": 1.3},
                },
                "2": {
                    "workers": 2,
                    "levels": [],
                    "maxSustained": 300,
                    "turns": {**workers_run, "gatewayTurnsPerS": 1100.0, "gatewayCpuMsPerTurn": 1.4},
                },
            },
        },
    }
    rows = {r["id"]: r for r in issue_targets(results)}
    assert (rows["turn_cpu_c50"]["value"], rows["turn_cpu_c50"]["met"]) == (1.2, True)
    assert (rows["turn_cpu_c1"]["value"], rows["turn_cpu_c1"]["met"]) == (2.5, False)
    assert rows["turns_per_s"]["value"] == 600.0  # the one-worker turns scenario wins over the workers run
    assert (rows["turns_per_s_2w"]["value"], rows["turns_per_s_2w"]["met"]) == (1100.0, True)
    assert (rows["workers_ratio"]["value"], rows["workers_ratio"]["met"]) == (1.5, False)
    assert rows["rss_per_stream"]["met"] is None
    table = markdown({"issueTargets": list(rows.values())})
    assert "| short turns per second, two workers, c=50 | – | 1100 turns/s | ≥ 1000 turns/s | yes |" in table
    section = markdown({"workers": results["workers"]})
    assert "| 2 | 1100 | 1.40 ms | 0.90 | 700 | 0.50 | 0 |" in section
    assert "Two workers ÷ one (median of the rounds' paired ratios): 1.50×." in section


def test_timeline_medians_measure_each_point_from_its_own_turns_request() -> None:
    marks = [
        ("request bytes", 10.0),
        ("open in", 10.001),
        ("first body", 10.004),
        ("first body", 10.009),
        ("request bytes", 20.0),
        ("open in", 20.003),
        ("first body", 20.006),
        ("request bytes", 30.0),
        ("open in", 30.002),  # no body yet: counted for the points it reached
    ]
    result = medians(marks, skip=0)
    assert abs(result["open in"][0] - 2.0) < 1e-9 and result["open in"][1] == 3
    assert abs(result["first body"][0] - 5.0) < 1e-9 and result["first body"][1] == 2  # the first of each turn
    assert medians(marks, skip=2)["open in"][1] == 1


def test_sustained_is_the_highest_level_below_the_first_failure() -> None:
    levels = [{"concurrency": c, "passed": ok, "directGapP99Ms": 21.0}
              for c, ok in [(25, True), (50, True), (200, True), (300, False), (500, True)]]  # fmt: skip
    assert sustained(levels) == 200  # 500 passed only because the direct path was saturated as well
    assert sustained(levels[:3]) == 200 and sustained([{"concurrency": 25, "passed": False}]) == 0


def test_sustained_stops_where_the_direct_path_loses_its_pacing() -> None:
    levels = [
        {"concurrency": c, "passed": True, "directGapP99Ms": direct}
        for c, direct in [(400, 23.9), (600, 31.0), (800, 37.8)]
    ]
    assert sustained(levels) == 400  # 600 "passed" with the direct path's own gap p99 11 ms past its 20 ms pacing


def test_the_idle_scenario_is_reported_per_pause() -> None:
    from bench.report import markdown

    kind = {"directTtftP50Ms": 0.4, "gatewayTtftP50Ms": 1.4, "addedTtftMs": 1.05, "failed": 0}
    idle = {"pairs": 60, "scenarios": {"short": "slow;n=5", "paced": "slow;n=3;delay_ms=20"},
            "levels": [{"pauseMs": p, "short": kind, "paced": dict(kind, addedTtftMs=2.2)} for p in (0, 100)]}  # fmt: skip
    rows = [
        line
        for line in markdown({"idle": idle}).splitlines()
        if line.startswith("| 0 ms") or line.startswith("| 100 ms")
    ]
    assert rows == [
        "| 0 ms | 1.05 ms | 0.40 ms | 2.20 ms | 0.40 ms |",
        "| 100 ms | 1.05 ms | 0.40 ms | 2.20 ms | 0.40 ms |",
    ]


def test_pools_targets_read_the_pools_scenario() -> None:
    pools = {"poolCpuOverheadPct": 3.6, "lowestLatencyP99Ratio": 0.33, "cache": {"shareWithKey": 0.826}}
    rows = {row["id"]: row for row in targets({"pools": pools})}
    assert (rows["pool_cpu_overhead"]["value"], rows["pool_cpu_overhead"]["met"]) == (3.6, True)
    assert (rows["pool_p99_ratio"]["value"], rows["pool_p99_ratio"]["met"]) == (0.33, True)
    assert (rows["pool_cache_share"]["value"], rows["pool_cache_share"]["met"]) == (82.6, True)
    assert rows["ttft_p50_c50"]["met"] is None  # not run


def _turns(cpu_ms: float, gateway_per_s: float) -> dict[str, Any]:
    level = {"concurrency": 1, "gatewayCpuMsPerTurn": cpu_ms, "gatewayTurnsPerS": gateway_per_s}
    return {"workers": 1, "levels": [{**level, "directTurnsPerS": 1000.0, "added": {"ttftP50Ms": 1.0}}]}


def test_history_puts_each_figure_beside_the_committed_one_and_marks_a_regression() -> None:
    from bench.history import beside
    from bench.report import markdown

    committed = {"meta": {"finishedAt": "then", "commit": "abc1234"}, "turns": _turns(1.0, 500.0)}
    history = beside({"turns": _turns(1.5, 500.0)}, committed)
    rows = {row["id"]: row for row in history["rows"]}
    assert (rows["turn_cpu_c1"]["committed"], rows["turn_cpu_c1"]["value"]) == (1.0, 1.5)
    assert (rows["turn_cpu_c1"]["change"], rows["turn_cpu_c1"]["worse"]) == (1.5, True)
    assert (rows["turns_ratio_c1"]["value"], rows["turns_ratio_c1"]["worse"]) == (0.5, False)
    assert "cancel_p99" not in rows  # a figure this run did not measure is left out
    text = markdown({"history": history})
    assert "## Beside the last committed run (finished then, commit abc1234)" in text
    assert "| gateway CPU per short turn, c=1 (absolute) | 1.00 ms | 1.50 ms | 1.50× **worse** |" in text


def test_history_reads_the_committed_results_not_the_file_a_run_overwrote(tmp_path: Path) -> None:
    from bench.history import COMMITTED, committed_results

    repo, plain = tmp_path / "repo", tmp_path / "plain"

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True)

    for root in (repo, plain):
        (root / COMMITTED).parent.mkdir(parents=True)
        (root / COMMITTED).write_text(json.dumps({"meta": {"commit": "committed"}}))
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "results")
    (repo / COMMITTED).write_text(json.dumps({"meta": {"commit": "this run"}}))
    assert committed_results(root=repo) == {"meta": {"commit": "committed"}}
    assert committed_results(root=plain) == {"meta": {"commit": "committed"}}  # no git: the file on disk
    assert committed_results(root=tmp_path) is None


def test_the_cold_start_is_reported_and_compared() -> None:
    from bench.history import beside
    from bench.report import markdown

    path = {"firstTurnS": 2.0, "firstTtftMs": 30.0, "warmTtftMs": 2.0, "firstTurnExtraTtftMs": 28.0, "idleRssMiB": 90.0}
    cold = {"scenario": "s", "rounds": 3, "gateway": path, "direct": dict(path, firstTurnS=1.0), "ratioToBare": 2.0,
            "firstTurnS": 2.0, "firstTurnExtraTtftMs": 28.0, "idleRssMiB": 90.0}  # fmt: skip
    history = beside({"coldStart": cold}, {"coldStart": dict(cold, ratioToBare=4.0)})
    rows = {row["id"]: row for row in history["rows"]}
    assert (rows["cold_start_ratio"]["change"], rows["cold_start_ratio"]["worse"]) == (0.5, False)
    text = markdown({"coldStart": cold, "history": history})
    assert "| gateway | 2.00 s | 30.00 ms | 2.00 ms | 28.00 ms | 90.00 MiB |" in text
    assert "Gateway ÷ simulator, start to first turn done: 2.00×." in text


def test_proc_stat_parsing_survives_a_command_name_with_spaces_and_parentheses() -> None:
    # proc(5): pid (comm) state ppid … utime(14) stime(15) … rss(24) …
    fields = ["S", "41", *["0"] * 9, "250", "30", *["0"] * 8, "1234", *["0"] * 20]
    stat = parse_stat(f"4242 (node (worker) 1) {' '.join(fields)}\n")
    assert stat == ProcStat(pid=4242, ppid=41, cpu_ticks=280, rss_pages=1234)


def test_process_tree_sums_the_root_and_every_descendant_only() -> None:
    stats = [
        ProcStat(pid=1, ppid=0, cpu_ticks=5, rss_pages=1),
        ProcStat(pid=10, ppid=1, cpu_ticks=100, rss_pages=10),  # the server
        ProcStat(pid=11, ppid=10, cpu_ticks=20, rss_pages=2),  # its worker
        ProcStat(pid=12, ppid=11, cpu_ticks=3, rss_pages=3),  # the worker's child
        ProcStat(pid=13, ppid=1, cpu_ticks=999, rss_pages=99),  # a sibling: not the server's
    ]
    assert sorted(s.pid for s in tree(10, stats)) == [10, 11, 12]
    assert sum(s.cpu_ticks for s in tree(10, stats)) == 123
    assert tree(77, stats) == []


def test_the_portkey_target_routes_by_headers_and_reads_its_chunks() -> None:
    target = Target(ClientPath.GATEWAY, 8787, door="portkey-chat", headers=portkey_headers("http://127.0.0.1:9"))
    head, body = target.request("slow;n=2", "hi", 0).split(b"\r\n\r\n", 1)
    assert b"POST /v1/chat/completions " in head
    assert b"\r\nx-portkey-provider: anthropic\r\n" in head
    assert b"\r\nx-portkey-custom-host: http://127.0.0.1:9/anthropic/v1\r\n" in head
    assert json.loads(body) == {"model": "slow;n=2", "max_tokens": 4096, "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    role = b'data: {"id":"anthropic-1","object":"chat.completion.chunk","choices":[{"delta":{"content":"","role":"assistant"}}]}'
    text = b'data: {"id":"anthropic-1","object":"chat.completion.chunk","choices":[{"delta":{"content":"0000000 "}}]}'
    assert text.startswith(target.delta_prefix) and role.startswith(target.delta_prefix)
    assert target.delta_text(role) is None
    assert target.delta_text(text) == "0000000 "
    assert target.end_event == b"data: [DONE]"
    # the gateway's own Chat Completions door keeps its model reference and field
    ours = json.loads(Target(ClientPath.GATEWAY, 8080, door="openai-chat").body("text", "hi", None))
    assert ours["model"] == "anthropic/text" and ours["max_completion_tokens"] == 4096


def test_peer_ratios_are_the_per_round_medians_and_the_table_marks_process_figures() -> None:
    def entry(chat: float, stream: float, portkey: float) -> dict[str, Any]:
        return {name: {"cpuMsPer1k": value, "cpuMsPerTurn": value} for name, value in
                (("direct", 1.0), ("gateway-chat", chat), ("gateway-stream", stream), ("portkey", portkey))}  # fmt: skip

    per_round = [entry(10, 8, 20), entry(12, 9, 20), entry(30, 20, 30)]
    over = over_portkey(per_round)  # per round 0.5 / 0.6 / 1.0 and 0.4 / 0.45 / 0.667: not 22/23.3 nor 14/23.3
    assert over["gateway-chat"] == {"cpuMsPer1k": 0.6, "cpuMsPerTurn": 0.6}
    assert over["gateway-stream"]["cpuMsPer1k"] == 0.45
    row = _process_row("idle RSS, process tree (MiB)", 80.0, 160.0)
    assert row["ratio-chat"] == 0.5 and row["process"]
    result = {"portkeyVersion": "1.15.2", "table": [row]}
    assert "(same process)" in table(result)[2] and table(result)[2].endswith("| 0.50 |")
    assert table({"skipped": "node not found"}) == ["Skipped: node not found."]


def test_history_compares_the_gateway_over_portkey_ratios() -> None:
    from bench.history import beside

    def peers(c1: float, c50: float) -> dict[str, Any]:
        over = {"gateway-chat": {"cpuMsPer1k": None}}
        return {"peers": {"long": {"c1": {"overPortkey": {"gateway-chat": {"cpuMsPer1k": c1}}},
                                   "c50": {"overPortkey": {"gateway-chat": {"cpuMsPer1k": c50}}}},
                          "short": {"c20": {"overPortkey": over}}}}  # fmt: skip

    rows = {row["id"]: row for row in beside(peers(0.6, 0.9), peers(0.6, 0.7))["rows"]}
    assert rows["portkey_cpu_c1"]["worse"] is False
    assert rows["portkey_cpu_c50"]["value"] == 0.9 and rows["portkey_cpu_c50"]["worse"] is True
    assert "portkey_turn_cpu_c20" not in rows  # no figure this run: no row
