"""The streaming clients in examples/ run against the rig's gateway and print what they promise: text as it
streams, tool calls when complete, and the stop reason or the error (with their exit status)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import marker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NODE = shutil.which("node")

CLIENTS = [
    pytest.param([sys.executable, str(EXAMPLES / "stream.py")], id="python-httpx"),
    pytest.param(
        [NODE or "node", str(EXAMPLES / "stream.mjs")],
        id="node-fetch",
        marks=pytest.mark.skipif(NODE is None, reason="node is not installed"),
    ),
]


def run_client(command: list[str], gateway: Any, model: str, prompt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "--url", gateway.url, "--model", model, prompt], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", CLIENTS)
def test_text_streams_and_ends_with_the_stop_reason(command: list[str], gateway: Any) -> None:
    prompt = marker()
    result = run_client(command, gateway, "anthropic/text", prompt)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[anthropic/text req_")
    assert lines[1] == f"Hello from the simulator. You said: {prompt}"
    assert lines[-1].startswith("done: stop (")
    assert gateway.sim.seen(prompt), "the example's request never reached the upstream"


@pytest.mark.parametrize("command", CLIENTS)
def test_tool_calls_print_when_complete(command: list[str], gateway: Any) -> None:
    result = run_client(command, gateway, "anthropic/tools", marker())
    assert result.returncode == 0, result.stderr
    calls = [line for line in result.stdout.splitlines() if line.startswith("tool call: ")]
    assert len(calls) == 2
    assert calls[0].startswith("tool call: get_weather ") and calls[0].endswith("(id toolu_sim_weather)")
    assert '"city"' in calls[0] and '"Paris"' in calls[0] and '"celsius"' in calls[0]
    assert calls[1].startswith("tool call: get_time ") and '"Europe/Paris"' in calls[1]
    assert "Let me check." in result.stdout
    assert result.stdout.splitlines()[-1].startswith("done: toolUse (")


@pytest.mark.parametrize("command", CLIENTS)
def test_error_event_is_printed_and_exits_1(command: list[str], gateway: Any) -> None:
    result = run_client(command, gateway, "anthropic/error-mid-stream", marker())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Hello from" in result.stdout  # the content that arrived before the error
    last = result.stdout.splitlines()[-1]
    assert last.startswith("error: error: ") and "anthropic" in last


@pytest.mark.parametrize("command", CLIENTS)
def test_http_error_before_streaming_exits_2(command: list[str], gateway: Any) -> None:
    result = run_client(command, gateway, "nosuchprovider/model", marker())
    assert result.returncode == 2
    assert "HTTP 404" in result.stderr and "nosuchprovider" in result.stderr


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="curl.sh needs curl and jq")
def test_curl_example_prints_text_and_tool_calls(gateway: Any) -> None:
    def curl(model: str, prompt: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "GATEWAY_URL": gateway.url, "MODEL": model}
        return subprocess.run(["bash", str(EXAMPLES / "curl.sh"), prompt], capture_output=True, text=True, timeout=60, env=env)

    prompt = f'{marker()} "quoted" back\\slash'
    text = curl("anthropic/text", prompt)
    assert text.returncode == 0, text.stderr
    assert f"Hello from the simulator. You said: {prompt}" in text.stdout
    assert text.stdout.splitlines()[-1].startswith("done: stop (")

    tools = curl("anthropic/tools", marker())
    assert 'tool call: get_weather {"city":"Paris","unit":"celsius"} (id toolu_sim_weather)' in tools.stdout
    assert tools.stdout.splitlines()[-1].startswith("done: toolUse (")
