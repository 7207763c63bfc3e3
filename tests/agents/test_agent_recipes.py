"""The recipes of docs/agents/ show what the agent tests run: where a test builds an agent's configuration in
code (the Codex CLI's `config.toml`), the page's snippet must be that configuration for `make run`."""

from __future__ import annotations

from tests.agent_clients import codex_config
from tests.agents.recipes import MAKE_RUN_URL, recipe


def test_the_codex_page_shows_the_config_the_codex_tests_run() -> None:
    assert recipe("codex.md", "config.toml") == codex_config(f"{MAKE_RUN_URL}/v1")
