"""Qwen Code (npm `@qwen-code/qwen-code`, pinned in tests/agents) against the gateway, in front of the simulator,
on every vendor: its settings and environment from docs/agents/qwen-code.md (pointed at the test's gateway),
through each door its auth types speak (`openai`: Chat, `openai-responses`, `anthropic`: Messages, `gemini`),
`qwen -p … --output-format json` with a home of its own, telemetry and update checks off."""

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
QWEN = AGENTS / "node_modules" / ".bin" / "qwen"
# auth type → the page's environment snippet for it
AUTH_TYPES = {"openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gemini"}
TOOL_RUNS = [("openai", "anthropic"), ("openai-responses", "google"), ("anthropic", "openai"), ("gemini", "google")]


@pytest.fixture(scope="module")
def qwen_code() -> Path:
    return npm_folder(AGENTS, "@qwen-code/qwen-code")


@dataclass
class QwenRun:
    returncode: int
    messages: list[dict[str, Any]]
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        [result] = [m for m in self.messages if m.get("type") == "result"]
        return result

    def blocks(self, kind: str) -> list[dict[str, Any]]:
        return [block for m in self.messages if m.get("type") in ("assistant", "user")
                for block in m["message"]["content"] if block.get("type") == kind]  # fmt: skip


def run_qwen(gateway_url: str, auth_type: str, model: str, prompt: str, cwd: Path, *flags: str) -> QwenRun:
    """`qwen --auth-type <auth_type> -m <model> -p <prompt> --output-format json` in `cwd`, configured by
    docs/agents/qwen-code.md."""
    home = cwd / ".home"
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(recipe("qwen-code.md", "settings.json"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
           **recipe_environment("qwen-code.md", f"environment-{AUTH_TYPES[auth_type]}", gateway_url)}  # fmt: skip
    command = [str(QWEN), "--auth-type", auth_type, "-m", model, "-p", prompt, "--output-format", "json", *flags]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    start = done.stdout.find("[{")
    return QwenRun(done.returncode, json.loads(done.stdout[start:]) if start >= 0 else [], done.stderr)


@pytest.mark.parametrize("vendor", VENDORS)
def test_qwen_code_answers_a_prompt(gateway: Any, qwen_code: Path, tmp_path: Path, vendor: str) -> None:
    m = marker()
    run = run_qwen(gateway.url, "openai", f"{vendor}/text", f"say hi {m}", tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.result["result"].startswith("Hello from the simulator. You said: ")  # its first user part echoed
    seen = gateway.sim.seen(m)
    assert seen and {s["vendor"] for s in seen} == {vendor}


@pytest.mark.parametrize(("auth_type", "vendor"), TOOL_RUNS)
def test_qwen_code_runs_its_shell_tool_and_answers_with_the_output(
    gateway: Any, qwen_code: Path, tmp_path: Path, auth_type: str, vendor: str
) -> None:
    proof = marker()  # only Qwen Code running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = run_qwen(gateway.url, auth_type, f"{vendor}/agent-shell", "Show me the proof file.", tmp_path,
                   "--approval-mode", "yolo")  # fmt: skip
    assert run.returncode == 0, run.stderr
    [call] = run.blocks("tool_use")
    assert call["name"] == "run_shell_command" and call["input"]["command"] == "cat proof.txt"
    [result] = run.blocks("tool_result")
    assert not result["is_error"] and proof in result["content"]
    assert run.result["result"].startswith("The tool said: ") and proof in run.result["result"]
    second = gateway.sim.seen(proof)
    assert [seen["vendor"] for seen in second] == [vendor], "the tool output went upstream once, to the vendor"


def test_qwen_code_reports_the_vendors_error(gateway: Any, qwen_code: Path, tmp_path: Path) -> None:
    run = run_qwen(gateway.url, "openai", "anthropic/http-400", marker(), tmp_path)
    assert run.returncode == 1, run.messages
    assert run.result["is_error"]
    message = run.result["error"]["message"]
    assert "anthropic/http-400 returned HTTP 400" in message and "simulated bad request" in message
