"""The project's npm folders for the tests (examples/js: the official SDKs; tests/agents: the Claude Code CLI and
the Vercel AI SDK), installed from their lock files, and how a test runs the Claude Code CLI.

Without node or npm the tests that need them skip; in CI (`GATEWAY_TEST_NODE=required`, set by .ci/run) they
fail instead, so a machine that lost its install step cannot pass by skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
NODE = shutil.which("node")
NPM = shutil.which("npm")
REQUIRED = os.environ.get("GATEWAY_TEST_NODE") == "required"  # CI (.ci/run): a missing node fails, never skips


def missing(reason: str) -> None:
    (pytest.fail if REQUIRED else pytest.skip)(reason)


def npm_folder(folder: Path, probe: str) -> Path:
    """`folder` with its pinned packages installed: `make test` installs them (`npm ci`); here again when
    `node_modules/<probe>` is absent. Skips (fails in CI) without node or npm."""
    if NODE is None:
        missing("node is not installed")
    if not (folder / "node_modules" / probe).exists():
        if NPM is None:
            missing(f"npm is not installed: run `npm ci --prefix {folder.relative_to(ROOT)}`")
        subprocess.run(
            [NPM, "ci", "--prefix", str(folder), "--no-audit", "--no-fund", "--loglevel=error"], check=True, timeout=600
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
    of its own under `cwd`, no telemetry, no auto-update, no retries (a vendor error is reported at once)."""
    home = cwd / ".home"
    home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": gateway_url,
        "ANTHROPIC_API_KEY": "sk-ant-cli-test",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
    }
    command = [str(AGENTS / "node_modules" / ".bin" / "claude"), "-p", prompt, "--output-format", "stream-json",
               "--verbose", "--model", model, *flags]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return ClaudeRun(done.returncode, lines, done.stderr)
