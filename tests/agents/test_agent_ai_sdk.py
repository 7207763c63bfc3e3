"""The Vercel AI SDK (`ai` streamText, pinned in tests/agents/package-lock.json) against the gateway: through the
Chat Completions door with `@ai-sdk/openai-compatible` and through the Messages door with `@ai-sdk/anthropic`.

Its agents run, when a stream ends, the tool calls it saw; a stream cut inside a call's arguments must
therefore never hand it that call. tests/agents/ai_sdk_turn.mjs gives the SDK two tools whose `execute`
records every call it runs, and prints the stream parts it saw (tool calls, errors, the finish).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, NODE, npm_folder
from tests.conftest import marker

SCRIPT = AGENTS / "ai_sdk_turn.mjs"
DOORS = ["chat", "messages"]
# A stream cut inside the first call's arguments (get_weather, toolu_sim_weather…): the connection lost, the
# vendor's in-band error, the token limit.
CUTS = [
    ("anthropic", "tools;fault=reset;at=toolargs"),
    ("openai", "tools;fault=error_event;at=toolargs"),
    ("openai", "tool-max-tokens"),
    ("compat", "tool-max-tokens"),
]


@pytest.fixture(scope="module")
def ai_sdk() -> Path:
    return npm_folder(AGENTS, "ai")


def ai_sdk_turn(gateway: Any, door: str, model: str, *flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [NODE or "node", str(SCRIPT), "--door", door, "--url", gateway.url, "--model", model, *flags, marker()],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parts = [json.loads(line) for line in done.stdout.splitlines()]
    assert parts and parts[-1]["type"] == "executed", done.stdout + done.stderr
    return {
        "calls": [p for p in parts if p["type"] == "tool-call"],
        "errors": [p["error"] for p in parts if p["type"] in ("error", "thrown")],
        "finish": [p["reason"] for p in parts if p["type"] == "finish"],
        "executed": parts[-1]["calls"],
    }


@pytest.mark.parametrize("door", DOORS)
def test_the_ai_sdk_runs_complete_tool_calls(door: str, gateway: Any, ai_sdk: Path) -> None:
    got = ai_sdk_turn(gateway, door, "anthropic/tools")
    assert got["errors"] == [] and got["finish"] == ["tool-calls"]
    assert [(c["name"], c["input"]) for c in got["executed"]] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(("vendor", "scenario"), CUTS)
def test_a_call_cut_inside_its_arguments_never_reaches_the_ai_sdk(
    door: str, vendor: str, scenario: str, gateway: Any, ai_sdk: Path
) -> None:
    got = ai_sdk_turn(gateway, door, f"{vendor}/{scenario}")
    assert got["calls"] == [] and got["executed"] == []
    assert got["finish"] == ["error"]
    [error] = got["errors"]
    assert error.startswith(f"{vendor}/{scenario} ") and "toolu_sim_weather" in error and "(get_weather)" in error, (
        error
    )


@pytest.mark.parametrize("door", DOORS)
def test_the_complete_call_before_a_cut_one_is_the_only_call_the_ai_sdk_sees(
    door: str, gateway: Any, ai_sdk: Path
) -> None:
    got = ai_sdk_turn(gateway, door, "anthropic/tool-max-tokens-second")
    assert [(c["name"], c["input"]) for c in got["calls"]] == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert {c["name"] for c in got["executed"]} <= {"get_weather"}
    [error] = got["errors"]
    assert "toolu_sim_time (get_time)" in error, error


def test_with_argument_fragments_the_ai_sdk_gets_a_call_with_half_its_arguments(gateway: Any, ai_sdk: Path) -> None:
    """Why the Chat door sends calls whole: asked for fragments (`X-Gateway-Tool-Arguments: stream`), a cut
    call reaches the SDK as a tool call whose input is the half that arrived."""
    got = ai_sdk_turn(gateway, "chat", "openai/tool-max-tokens", "--header", "X-Gateway-Tool-Arguments: stream")
    assert [(c["name"], c["input"]) for c in got["calls"]] == [("get_weather", '{"city": "Pa' + 'ris", "un')]
    assert "(get_weather)" in got["errors"][0]
