"""The configuration snippets of the agent recipes (docs/agents/*.md), read by the tests that run each agent, so
the page shows exactly what the test runs.

A snippet is the fenced code block right after a `<!-- recipe: <name> -->` line. It is written for `make run`
(the gateway at `MAKE_RUN_URL`); `recipe(page, name, url)` gives it pointed at the test's gateway instead.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "agents"
MAKE_RUN_URL = "http://127.0.0.1:8080"


def recipe(page: str, name: str, gateway_url: str = MAKE_RUN_URL) -> str:
    """The snippet `name` of docs/agents/`page`, with `MAKE_RUN_URL` replaced by `gateway_url`."""
    text = (DOCS / page).read_text()
    found = re.search(rf"^<!-- recipe: {re.escape(name)} -->\n```[\w-]*\n(.*?)^```$", text, re.M | re.S)
    assert found, f"docs/agents/{page} has no snippet marked <!-- recipe: {name} -->"
    return found.group(1).replace(MAKE_RUN_URL, gateway_url.rstrip("/"))


def recipe_environment(page: str, name: str, gateway_url: str = MAKE_RUN_URL) -> dict[str, str]:
    """The variables a shell snippet of `export NAME=value` lines sets (values unquoted, no expansion)."""
    exports = re.findall(r"^export (\w+)=(.*)$", recipe(page, name, gateway_url), re.M)
    return {key: value.strip("\"'") for key, value in exports}
