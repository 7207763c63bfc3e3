"""The published Claude Code CLI (npm `@anthropic-ai/claude-code`, pinned in tests/agents/package-lock.json) runs
in print mode against the gateway's Messages door, in front of the simulator speaking each vendor's wire
format: a text answer, thinking, a tool call the CLI executes and answers in a second turn, a vendor error it
reports, and a turn cut off by the token limit.

The model ids are the simulator's scenarios (`<provider>/<scenario>`); the CLI does not know them, so it sends
its full current request surface (a system-role message inside `messages`, adaptive thinking, effort, context
management, a deferred tool; see tests/agents/capture.py for what it sends).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, ClaudeRun, npm_folder, run_claude
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]


@pytest.fixture(scope="module")
def claude_code() -> Path:
    return npm_folder(AGENTS, "@anthropic-ai/claude-code")


def claude(gateway: Any, model: str, prompt: str, cwd: Path, *flags: str) -> ClaudeRun:
    return run_claude(gateway.url, model, prompt, cwd, *flags)


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_gets_a_text_answer(vendor: str, gateway: Any, claude_code: Path, tmp_path: Path) -> None:
    prompt = marker()
    run = claude(gateway, f"{vendor}/text", prompt, tmp_path)
    result = run.result
    assert run.returncode == 0 and not result["is_error"], result
    assert result["result"].startswith("Hello from the simulator. You said: ")
    assert result["stop_reason"] == "end_turn"
    assert gateway.sim.seen(prompt), "the CLI's request never reached the upstream"


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_shows_the_thinking(vendor: str, gateway: Any, claude_code: Path, tmp_path: Path) -> None:
    run = claude(gateway, f"{vendor}/thinking", marker(), tmp_path)
    assert run.returncode == 0 and not run.result["is_error"], run.result
    thinking = run.blocks("thinking")
    assert [block["thinking"] for block in thinking] == ["The user greets me. I should greet back."]
    assert thinking[0]["signature"], "a thinking block the CLI cannot send back signed"
    assert run.result["result"].startswith("Hello from the simulator.")


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_runs_a_tool_call_and_answers_with_its_result(
    vendor: str, gateway: Any, claude_code: Path, tmp_path: Path
) -> None:
    proof = marker()  # only the CLI running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = claude(gateway, f"{vendor}/agent-tool", "Show me the proof file.", tmp_path, "--allowedTools", "Bash")
    assert run.returncode == 0 and not run.result["is_error"], run.result
    calls = run.blocks("tool_use")
    assert [(c["name"], c["input"]["command"]) for c in calls] == [("Bash", "cat proof.txt")]
    assert run.result["result"] == f"The tool said: {proof}"
    assert run.result["num_turns"] == 2
    second = gateway.sim.seen(proof)
    assert len(second) == 1 and second[0]["vendor"] == vendor, "the tool result went upstream once, to the vendor"


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_reports_the_vendors_error(vendor: str, gateway: Any, claude_code: Path, tmp_path: Path) -> None:
    run = claude(gateway, f"{vendor}/http-400", marker(), tmp_path)
    result = run.result
    assert run.returncode == 1 and result["is_error"], result
    assert result["api_error_status"] == 400
    # The vendor's own words: its status, its error type (Gemini's INVALID_ARGUMENT) and message.
    assert result["result"].startswith(f"API Error: 400 {vendor}/http-400 returned HTTP 400: "), result["result"]
    assert result["result"].endswith(": simulated bad request")


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_reports_a_vendor_error_after_the_answer_began(
    vendor: str, gateway: Any, claude_code: Path, tmp_path: Path
) -> None:
    run = claude(gateway, f"{vendor}/error-mid-stream", marker(), tmp_path)
    result = run.result
    assert run.returncode == 1 and result["is_error"], result
    assert result["result"].startswith("API Error: ") and f"{vendor}/error-mid-stream " in result["result"], result[
        "result"
    ]
    assert "Overloaded" in result["result"]


@pytest.mark.parametrize("vendor", VENDORS)
def test_claude_code_sees_a_turn_cut_off_by_max_tokens(
    vendor: str, gateway: Any, claude_code: Path, tmp_path: Path
) -> None:
    prompt = marker()
    run = claude(gateway, f"{vendor}/max-tokens", prompt, tmp_path)
    result = run.result
    # The CLI reads stop_reason max_tokens: it asks the model to resume (a user turn of its own), a few times,
    # then gives up with its output-limit error.
    assert run.returncode == 1 and result["is_error"], result
    assert "exceeded the" in result["result"] and "output token maximum" in result["result"], result["result"]
    resumed = [seen for seen in gateway.sim.seen(prompt) if "Output token limit hit" in json.dumps(seen["body"])]
    assert resumed and all(seen["vendor"] == vendor for seen in resumed)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_agent_tool_scenario_answers_the_tool_result_it_is_sent(vendor: str, gateway: Any) -> None:
    """The simulator's `agent-tool` (what the CLI tests drive): a `Bash` call first, then, in the turn that
    carries its result in the vendor's own format, an answer quoting it."""
    proof = marker()
    history = [{"role": "user", "content": "Show me the proof file."}]
    first = gateway.stream(
        {"model": f"{vendor}/agent-tool", "max_tokens": 100, "stream": True, "messages": history},
        path="/v1/messages",
        check=False,
    )
    call = next(
        e["content_block"]
        for e in first.events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    )
    assert call["name"] == "Bash"
    history += [
        {"role": "assistant", "content": [{**call, "input": {"command": "cat proof.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": proof}]},
    ]
    second = gateway.stream(
        {"model": f"{vendor}/agent-tool", "max_tokens": 100, "stream": True, "messages": history},
        path="/v1/messages",
        check=False,
    )
    text = "".join(
        e["delta"]["text"]
        for e in second.events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )
    assert text == f"The tool said: {proof}"


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])  # Gemini sends whole calls: it cuts none
def test_claude_code_names_the_tool_call_the_upstream_cut(
    vendor: str, gateway: Any, claude_code: Path, tmp_path: Path
) -> None:
    """The vendor's output stops inside a tool call's arguments (the token limit): the CLI's user learns which
    call was cut and why, not "Server error mid-response"."""
    run = claude(gateway, f"{vendor}/tool-max-tokens", marker(), tmp_path)
    result = run.result
    assert run.returncode == 1 and result["is_error"], result
    shown = result["result"]
    assert shown.startswith("API Error: ") and "tool call " in shown and "(get_weather)" in shown, shown
    assert "cut off by the token limit" in shown, shown


@pytest.mark.parametrize(
    "model",
    [f"{vendor}/agent-parallel" for vendor in VENDORS] + ["google/agent-parallel-ids"],
)
def test_claude_code_runs_both_parallel_tool_calls_of_every_answer(
    model: str, gateway: Any, claude_code: Path, tmp_path: Path
) -> None:
    """Two answers of two parallel calls each, the vendor numbering its calls per answer (the second answer
    repeats the first one's ids; Gemini 2.5 sends none, each call in a chunk of its own, the first signed): the
    CLI runs all four and answers the last two, because every call reaches it with an id of its own."""
    proofs = [marker(), marker(), "again " + marker(), "again " + marker()]  # the second pair ends the loop
    for name, proof in zip(("proof.txt", "proof2.txt", "proof3.txt", "proof4.txt"), proofs):
        (tmp_path / name).write_text(proof + "\n")
    run = claude(gateway, model, "Show me the proof files.", tmp_path, "--allowedTools", "Bash")
    assert run.returncode == 0 and not run.result["is_error"], run.result
    calls = run.blocks("tool_use")
    assert [c["input"]["command"] for c in calls] == [
        "cat proof.txt",
        "cat proof2.txt",
        "cat proof3.txt",
        "cat proof4.txt",
    ]
    assert len({c["id"] for c in calls}) == 4, [c["id"] for c in calls]
    shown = run.result["result"]  # the two results of a pair come back in the order the calls finished
    assert shown.startswith("The tools said: ") and all(p in shown for p in proofs[2:]), shown
