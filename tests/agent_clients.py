"""The project's npm folders for the tests (examples/js: the official SDKs; tests/agents: the agent CLIs and the
Vercel AI SDK), installed from their lock files, and how a test runs the Claude Code and Codex CLIs.

Without node or npm the tests that need them skip; in CI (`GATEWAY_TEST_NODE=required`, set by .ci/run) they
fail instead, so a machine that lost its install step cannot pass by skipping.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.agents.recipes import recipe_environment

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
NODE = shutil.which("node")
NPM = shutil.which("npm")
REQUIRED = os.environ.get("GATEWAY_TEST_NODE") == "required"  # CI (.ci/run): a missing node or Aider fails


def missing(reason: str) -> None:
    (pytest.fail if REQUIRED else pytest.skip)(reason)


def npm_folder(folder: Path, probe: str) -> Path:
    """`folder` with its pinned packages installed: `make test` installs them (`npm ci`); here again when
    `node_modules/<probe>` is absent. Skips (fails in CI) without node or npm."""
    if NODE is None:
        missing("node is not installed")
    # Under a lock: the pytest-xdist workers may all get here at once, and one of them may be installing.
    with open(Path(tempfile.gettempdir()) / f"gateway-tests-npm-{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "node_modules" / probe).exists():
            if NPM is None:
                missing(f"npm is not installed: run `npm ci --prefix {folder.relative_to(ROOT)}`")
            subprocess.run(
                [NPM, "ci", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel=error"],
                check=True,
                timeout=600,
            )
    return folder


@dataclass
class ClaudeRun:
    """One `claude -p … --output-format stream-json --verbose` run: its exit status and its JSON lines."""

    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        """The closing `result` line (the answer's text or the error the CLI reports, and why it stopped)."""
        results = [line for line in self.lines if line.get("type") == "result"]
        assert results, f"the CLI wrote no result line (exit {self.returncode}): {self.stderr}"
        return results[-1]

    def blocks(self, kind: str) -> list[dict[str, Any]]:
        """The content blocks of type `kind` of the assistant messages, in order."""
        return [
            block
            for line in self.lines
            if line.get("type") == "assistant"
            for block in line["message"].get("content") or []
            if block.get("type") == kind
        ]


def run_claude(gateway_url: str, model: str, prompt: str, cwd: Path, *flags: str) -> ClaudeRun:
    """Run the pinned Claude Code CLI in print mode against `gateway_url` (its Messages door), offline: a HOME
    of its own under `cwd`, the environment of docs/agents/claude-code.md (no telemetry, no auto-update, no
    retries: a vendor error is reported at once)."""
    home = cwd / ".home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        **recipe_environment("claude-code.md", "environment", gateway_url),
    }
    command = [
        str(AGENTS / "node_modules" / ".bin" / "claude"),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        model,
        *flags,
    ]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return ClaudeRun(done.returncode, lines, done.stderr)


CODEX = AGENTS / "node_modules" / ".bin" / "codex"
CODEX_KEY_ENV = "GATEWAY_API_KEY"


def _toml(value: Any) -> str:
    """A TOML value for the few kinds config.toml needs here (JSON's strings are TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return json.dumps(value)
    raise TypeError(f"no TOML for {value!r}")


def codex_config(
    base_url: str,
    *,
    websockets: bool = False,
    settings: dict[str, Any] | None = None,
    name: str = "Gateway",
    retries: bool = False,
) -> str:
    """config.toml for the Codex CLI: one custom provider (`gateway`) speaking the Responses API at `base_url`
    (`…/v1`), its key from the environment, no retries unless `retries` (a vendor error is reported at once;
    with `retries` the CLI's own default retries, with back-off), and nothing that
    reaches another host: no update check, no analytics or feedback upload, no plugin marketplace sync (git to
    github.com), no remote plugins or apps (chatgpt.com) — tests/codex/README.md shows the captures."""
    top = {"model_provider": "gateway", "check_for_update_on_startup": False, "approval_policy": "never",
           **(settings or {})}  # fmt: skip
    provider = {"name": name, "base_url": base_url, "env_key": CODEX_KEY_ENV, "wire_api": "responses",
                "supports_websockets": websockets}  # fmt: skip
    if not retries:
        provider |= {"request_max_retries": 0, "stream_max_retries": 0}
    tables = {
        "model_providers.gateway": provider,
        "features": {"plugins": False, "remote_plugin": False, "apps": False},
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
    }
    lines = [f"{key} = {_toml(value)}" for key, value in top.items()]
    for table_name, table in tables.items():
        lines += ["", f"[{table_name}]", *(f"{key} = {_toml(value)}" for key, value in table.items())]
    return "\n".join(lines) + "\n"


def codex_environment(
    cwd: Path,
    base_url: str,
    api_key: str,
    *,
    websockets: bool = False,
    settings: dict[str, Any] | None = None,
    name: str = "Gateway",
    retries: bool = False,
) -> dict[str, str]:
    """The environment `codex` runs in: a CODEX_HOME of its own under `cwd` holding `codex_config(base_url)`, a
    HOME there too, the key in `CODEX_KEY_ENV`. `base_url` is the server's root; the provider gets `…/v1`."""
    home = cwd / ".codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        codex_config(f"{base_url}/v1", websockets=websockets, settings=settings, name=name, retries=retries)
    )
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home),
            CODEX_KEY_ENV: api_key}  # fmt: skip


@dataclass
class CodexRun:
    """One `codex exec --json` run: its exit status and its JSON lines (thread.started, turn.started,
    item.started / item.completed, turn.completed or turn.failed, error)."""

    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    def items(self, kind: str) -> list[dict[str, Any]]:
        """The completed items of type `kind` (agent_message, command_execution, reasoning, error…), in order."""
        return [line["item"] for line in self.lines if line.get("type") == "item.completed"
                and line["item"].get("type") == kind]  # fmt: skip

    @property
    def answer(self) -> str | None:
        """The text of the last agent message, the answer `codex exec` prints."""
        messages = self.items("agent_message")
        return messages[-1]["text"] if messages else None

    @property
    def failure(self) -> str | None:
        """The message of the turn's failure (`turn.failed`), None when the turn completed."""
        failed = [line for line in self.lines if line.get("type") == "turn.failed"]
        return failed[-1]["error"]["message"] if failed else None


def run_codex(
    gateway_url: str,
    model: str,
    prompt: str,
    cwd: Path,
    *flags: str,
    api_key: str = "sk-codex-cli-test",
    websockets: bool = False,
    settings: dict[str, Any] | None = None,
    name: str = "Gateway",
    retries: bool = False,
) -> CodexRun:
    """Run the pinned Codex CLI (`codex exec --json`) against `gateway_url` (its Responses door) in `cwd`,
    offline (`codex_config`)."""
    env = codex_environment(
        cwd, gateway_url, api_key, websockets=websockets, settings=settings, name=name, retries=retries
    )
    command = [str(CODEX), "exec", "--json", "--skip-git-repo-check", "--model", model, *flags, prompt]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return CodexRun(done.returncode, lines, done.stderr)
