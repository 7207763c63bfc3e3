"""OpenCode (npm `opencode-ai`, pinned in tests/agents) against the gateway, in front of the simulator, on every
vendor: its config and environment from docs/agents/opencode.md (pointed at the test's gateway), one custom
provider per door (Chat, Responses, Messages, Gemini), `opencode run --format json` with a home of its own and
nothing that reaches the internet (no update check, no models.dev fetch, no npm install)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, npm_folder
from tests.agents.recipes import recipe, recipe_environment
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
OPENCODE = AGENTS / "node_modules" / ".bin" / "opencode"
# Each door once, each vendor at least once (an OpenCode run takes seconds; the pi tests cover every pair).
TOOL_RUNS = [("gateway-chat", "anthropic"), ("gateway-responses", "google"), ("gateway-messages", "openai"),
             ("gateway-gemini", "anthropic")]  # fmt: skip


@pytest.fixture(scope="module")
def opencode() -> Path:
    return npm_folder(AGENTS, "opencode-ai")


@dataclass
class OpenCodeRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == kind]

    @property
    def text(self) -> str:
        return "".join(event["part"]["text"] for event in self.of("text"))


def run_opencode(gateway_url: str, model: str, prompt: str, cwd: Path) -> OpenCodeRun:
    """`opencode run -m <provider>/<model> --format json <prompt>` in `cwd`, configured by docs/agents/opencode.md."""
    home = cwd / ".home"
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(recipe("opencode.md", "opencode.json", gateway_url))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           **recipe_environment("opencode.md", "environment")}  # fmt: skip
    command = [str(OPENCODE), "run", "-m", model, "--format", "json", prompt]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return OpenCodeRun(done.returncode, events, done.stderr)


@pytest.mark.parametrize("vendor", VENDORS)
def test_opencode_answers_a_prompt(gateway: Any, opencode: Path, tmp_path: Path, vendor: str) -> None:
    m = marker()
    run = run_opencode(gateway.url, f"gateway-chat/{vendor}/text", f"say hi {m}", tmp_path)
    assert run.returncode == 0, (run.events, run.stderr)
    assert run.text.startswith("Hello from the simulator. You said: ") and f"say hi {m}" in run.text
    seen = gateway.sim.seen(m)  # the turn, and the session title OpenCode asks the same model for
    assert seen and {s["vendor"] for s in seen} == {vendor}


@pytest.mark.parametrize(("door", "vendor"), TOOL_RUNS)
def test_opencode_runs_its_bash_tool_and_answers_with_the_output(
    gateway: Any, opencode: Path, tmp_path: Path, door: str, vendor: str
) -> None:
    proof = marker()  # only OpenCode running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = run_opencode(gateway.url, f"{door}/{vendor}/agent-bash", "Show me the proof file.", tmp_path)
    assert run.returncode == 0, (run.events, run.stderr)
    [tool] = run.of("tool_use")
    assert tool["part"]["tool"] == "bash" and tool["part"]["state"]["status"] == "completed"
    assert tool["part"]["state"]["output"] == proof + "\n"
    assert run.of("text")[-1]["part"]["text"].startswith("The tool said: ") and proof in run.text
    second = gateway.sim.seen(proof)
    assert [seen["vendor"] for seen in second] == [vendor], "the tool output went upstream once, to the vendor"


def test_opencode_reports_the_vendors_error(gateway: Any, opencode: Path, tmp_path: Path) -> None:
    run = run_opencode(gateway.url, "gateway-chat/google/http-400", marker(), tmp_path)
    assert run.returncode == 1, run.events
    [error] = run.of("error")
    assert error["error"]["data"]["statusCode"] == 400
    assert "google/http-400 returned HTTP 400" in error["error"]["data"]["message"]
    assert "simulated bad request" in error["error"]["data"]["message"]
