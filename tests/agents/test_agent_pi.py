"""pi's coding agent (npm `@mariozechner/pi-coding-agent`, pinned in tests/agents) against the gateway, in front of
the simulator, on every vendor: its custom providers from docs/agents/pi.md (the page's `models.json` and
environment, pointed at the test's gateway), one per door it speaks (Chat, Responses, Messages, Gemini), run in
print mode with a home of its own and `PI_OFFLINE=1` (no update check, no telemetry)."""

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
DOORS = ["gateway-chat", "gateway-responses", "gateway-messages", "gateway-gemini"]  # the page's providers
PI = AGENTS / "node_modules" / ".bin" / "pi"


@pytest.fixture(scope="module")
def pi_agent() -> Path:
    return npm_folder(AGENTS, "@mariozechner/pi-coding-agent")


@dataclass
class PiRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON lines of `--mode json` (session, turn, message and tool execution events)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == kind]


def run_pi(gateway_url: str, model: str, prompt: str, cwd: Path, *flags: str) -> PiRun:
    """`pi -p <prompt> --model <provider>/<model>` in `cwd`, configured by docs/agents/pi.md."""
    agent_dir = cwd / ".home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(recipe("pi.md", "models.json", gateway_url))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd / ".home"),
        **recipe_environment("pi.md", "environment"),
    }
    command = [str(PI), "-p", prompt, "--model", model, "--no-session", *flags]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    return PiRun(done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("vendor", VENDORS)
def test_pi_answers_a_prompt(gateway: Any, pi_agent: Path, tmp_path: Path, vendor: str) -> None:
    m = marker()
    run = run_pi(gateway.url, f"gateway-chat/{vendor}/text", f"say hi {m}", tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"Hello from the simulator. You said: say hi {m}"
    assert [seen["vendor"] for seen in gateway.sim.seen(m)] == [vendor]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("vendor", VENDORS)
def test_pi_runs_its_bash_tool_and_answers_with_the_output(
    gateway: Any, pi_agent: Path, tmp_path: Path, vendor: str, door: str
) -> None:
    proof = marker()  # only pi running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = run_pi(gateway.url, f"{door}/{vendor}/agent-bash", "Show me the proof file.", tmp_path, "--mode", "json")
    assert run.returncode == 0, run.stderr
    [tool] = run.of("tool_execution_end")
    assert tool["toolName"] == "bash" and not tool["isError"]
    assert tool["result"]["content"][0]["text"] == proof + "\n"
    [*_, last] = run.of("message_end")
    assert [(c["type"], c["text"]) for c in last["message"]["content"]] == [("text", f"The tool said: {proof}")]
    second = gateway.sim.seen(proof)
    assert [seen["vendor"] for seen in second] == [vendor], "the tool output went upstream once, to the vendor"


@pytest.mark.parametrize(("door", "vendor"), list(zip(DOORS, ["anthropic", "openai", "google", "anthropic"])))
def test_pi_reports_the_vendors_error(gateway: Any, pi_agent: Path, tmp_path: Path, door: str, vendor: str) -> None:
    run = run_pi(gateway.url, f"{door}/{vendor}/http-400", marker(), tmp_path)
    assert run.returncode == 1, run.stdout
    assert f"{vendor}/http-400 returned HTTP 400" in run.stderr and "simulated bad request" in run.stderr
