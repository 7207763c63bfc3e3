"""Aider (PyPI `aider-chat`, pinned in tests/agents/aider/requirements.txt, installed by `make aider-venv` into
tests/agents/.aider-venv) against the gateway, in front of the simulator, on every vendor: its environment,
`.aider.conf.yml` and model metadata from docs/agents/aider.md (pointed at the test's gateway), through both doors
LiteLLM speaks for it (`openai/<model>`: Chat, `anthropic/<model>`: Messages), `aider --message …` in a home of
its own, with every connection but loopback sent to a closed proxy port (so a call home would show)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from simulator.scenarios import AGENT_EDIT_CONTENT, AGENT_EDIT_FILE
from tests.agent_clients import AGENTS, missing
from tests.agents.recipes import recipe, recipe_environment
from tests.conftest import marker

# (door, vendor), the door by LiteLLM's prefix (`openai`: Chat, `anthropic`: Messages): every vendor, every door
RUNS = [("openai", "anthropic"), ("anthropic", "openai"), ("openai", "google"), ("anthropic", "google")]
AIDER_VENV = AGENTS / ".aider-venv"
REQUIREMENTS = AGENTS / "aider" / "requirements.txt"
CLOSED_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection through it fails at once


@pytest.fixture(scope="module")
def aider() -> Path:
    """The pinned `aider`, installed by `make aider-venv` (too slow to install here: minutes). Skips (fails in CI)
    when it is missing or was installed from another requirements file."""
    installed = AIDER_VENV / "requirements.txt"  # the copy `make aider-venv` leaves once the install succeeded
    if not installed.exists() or installed.read_text() != REQUIREMENTS.read_text():
        missing(f"Aider is not installed from {REQUIREMENTS.relative_to(AGENTS.parent.parent)}: run `make aider-venv`")
    return AIDER_VENV / "bin" / "aider"


@dataclass
class AiderRun:
    returncode: int
    output: str  # stdout and stderr: Aider prints the answer, its edits and errors to the terminal


def run_aider(aider: Path, gateway_url: str, model: str, prompt: str, cwd: Path) -> AiderRun:
    """`aider --model <model> --message <prompt> --yes-always` in `cwd`, configured by docs/agents/aider.md."""
    home = cwd / ".home"
    home.mkdir()
    for name in (".aider.conf.yml", ".aider.model.metadata.json"):
        (home / name).write_text(recipe("aider.md", name))
    proxies = {name: CLOSED_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    # COLUMNS: Aider's console wraps its output at the terminal's width, 80 without a terminal.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "COLUMNS": "1000", **proxies,
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
           **recipe_environment("aider.md", "environment", gateway_url)}  # fmt: skip
    command = [str(aider), "--model", model, "--message", prompt, "--yes-always", "--no-pretty", "--no-fancy-input"]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    output = done.stdout + done.stderr
    assert "127.0.0.1:9" not in output and "ProxyError" not in output, f"Aider reached past the gateway: {output}"
    return AiderRun(done.returncode, output)


@pytest.mark.parametrize(("door", "vendor"), RUNS)
def test_aider_answers_a_prompt(gateway: Any, aider: Path, tmp_path: Path, door: str, vendor: str) -> None:
    m = marker()
    run = run_aider(aider, gateway.url, f"{door}/{vendor}/text", f"say hi {m}", tmp_path)
    assert run.returncode == 0, run.output
    assert "Hello from the simulator. You said: " in run.output
    seen = gateway.sim.seen(m)
    assert seen and {s["vendor"] for s in seen} == {vendor}


@pytest.mark.parametrize(("door", "vendor"), RUNS[:3])
def test_aider_writes_the_file_of_the_models_edit_block(
    gateway: Any, aider: Path, tmp_path: Path, door: str, vendor: str
) -> None:
    m = marker()
    run = run_aider(aider, gateway.url, f"{door}/{vendor}/agent-edit", f"write {AGENT_EDIT_FILE} {m}", tmp_path)
    assert run.returncode == 0, run.output
    assert (tmp_path / AGENT_EDIT_FILE).read_text() == AGENT_EDIT_CONTENT, run.output
    assert f"Applied edit to {AGENT_EDIT_FILE}" in run.output
    assert {s["vendor"] for s in gateway.sim.seen(m)} == {vendor}


@pytest.mark.parametrize(("door", "vendor"), [("openai", "anthropic"), ("anthropic", "google")])
def test_aider_reports_the_vendors_error(gateway: Any, aider: Path, tmp_path: Path, door: str, vendor: str) -> None:
    run = run_aider(aider, gateway.url, f"{door}/{vendor}/http-400", marker(), tmp_path)
    # Aider prints the error and ends the message (its exit status stays 0); the gateway's message names the model.
    assert "litellm.BadRequestError" in run.output, run.output
    assert f"{vendor}/http-400 returned HTTP 400" in run.output and "simulated bad request" in run.output
