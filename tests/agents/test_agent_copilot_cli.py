"""The GitHub Copilot CLI (npm `@github/copilot`, pinned in tests/agents) against the gateway, in front of the
simulator, on every vendor: its "bring your own key" mode from docs/agents/copilot-cli.md (the page's
environment, pointed at the test's gateway), through each door it speaks (Chat, Responses, Messages),
`copilot -p … --output-format json` with a home of its own, offline (`COPILOT_OFFLINE=1`, no auto-update)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, npm_folder
from tests.agents.recipes import recipe_environment
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
COPILOT = AGENTS / "node_modules" / ".bin" / "copilot"
TOOL_RUNS = [("chat", "anthropic"), ("responses", "google"), ("messages", "openai")]


@pytest.fixture(scope="module")
def copilot_cli() -> Path:
    return npm_folder(AGENTS, "@github/copilot")


@dataclass
class CopilotRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event["data"] for event in self.events if event.get("type") == kind]


def run_copilot(gateway_url: str, door: str, model: str, prompt: str, cwd: Path) -> CopilotRun:
    """`copilot -p <prompt> --allow-all-tools --output-format json` in `cwd` with `COPILOT_MODEL=<model>`,
    configured by docs/agents/copilot-cli.md for `door`."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd / ".home"), "COPILOT_MODEL": model,
           **recipe_environment("copilot-cli.md", f"environment-{door}", gateway_url)}  # fmt: skip
    command = [str(COPILOT), "-p", prompt, "--allow-all-tools", "--output-format", "json"]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return CopilotRun(done.returncode, events, done.stderr)


@pytest.mark.parametrize("vendor", VENDORS)
def test_copilot_cli_answers_a_prompt(gateway: Any, copilot_cli: Path, tmp_path: Path, vendor: str) -> None:
    m = marker()
    run = run_copilot(gateway.url, "chat", f"{vendor}/text", f"say hi {m}", tmp_path)
    assert run.returncode == 0, (run.events, run.stderr)
    assert run.of("assistant.message")[-1]["content"].startswith("Hello from the simulator. You said: ")
    seen = gateway.sim.seen(m)
    assert seen and {s["vendor"] for s in seen} == {vendor}


@pytest.mark.parametrize(("door", "vendor"), TOOL_RUNS)
def test_copilot_cli_runs_its_bash_tool_and_answers_with_the_output(
    gateway: Any, copilot_cli: Path, tmp_path: Path, door: str, vendor: str
) -> None:
    proof = marker()  # only the CLI running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = run_copilot(gateway.url, door, f"{vendor}/agent-bash", "Show me the proof file.", tmp_path)
    assert run.returncode == 0, (run.events, run.stderr)
    [done] = run.of("tool.execution_complete")
    assert done["success"] and done["result"]["content"].startswith(proof + "\n")
    answer = run.of("assistant.message")[-1]["content"]
    assert answer.startswith("The tool said: ") and proof in answer
    second = gateway.sim.seen(proof)
    assert [seen["vendor"] for seen in second] == [vendor], "the tool output went upstream once, to the vendor"


def test_copilot_cli_reports_the_vendors_error(gateway: Any, copilot_cli: Path, tmp_path: Path) -> None:
    run = run_copilot(gateway.url, "chat", "google/http-400", marker(), tmp_path)
    assert run.returncode == 1, run.events
    [error] = run.of("session.error")
    assert error["statusCode"] == 400
    assert "google/http-400 returned HTTP 400" in error["message"] and "simulated bad request" in error["message"]
