"""The door examples (examples/openai_chat.py with the openai SDK, examples/js/openai_chat.mjs with the npm
`openai` package; examples/anthropic_messages.py and examples/js/anthropic_messages.mjs with the Anthropic
SDKs) run against the rig's gateway and print exactly what they promise: the serving model and
completion id, text as it streams, tool calls when the stream ends, the finish reason — with their exit
status (0 finished, 1 failed after the start, 2 HTTP or connection error)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import NODE, npm_folder
from tests.conftest import marker
from tests.procs import free_port

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JS = EXAMPLES / "js"
COMPLETION_ID = "chatcmpl-req_[0-9a-f]{28}"


@pytest.fixture(scope="session")
def js_sdks() -> Path:
    """examples/js with its pinned SDKs installed (`make test` installs them; `npm ci` here when missing)."""
    return npm_folder(JS, "openai")


CLIENTS = [pytest.param("python", id="python-openai"), pytest.param("node", id="node-openai")]


def run(
    client: str, url: str, model: str, prompt: str, request: Any, example: str = "openai_chat", *flags: str
) -> subprocess.CompletedProcess[str]:
    if client == "python":
        command = [sys.executable, str(EXAMPLES / f"{example}.py")]
    else:
        request.getfixturevalue("js_sdks")
        command = [NODE or "node", str(JS / f"{example}.mjs")]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(
        [*command, "--url", url, "--model", model, *flags, prompt], capture_output=True, text=True, timeout=60, env=env
    )


def assert_output(text: str, *lines: str) -> None:
    pattern = "".join(line + "\n" for line in lines)
    assert re.fullmatch(pattern, text), f"expected:\n{pattern}\ngot:\n{text}"


@pytest.mark.parametrize("client", CLIENTS)
def test_text_streams_then_the_finish_reason(client: str, gateway: Any, request: Any) -> None:
    prompt = f'{marker()} "quoted" back\\slash'
    result = run(client, gateway.url, "anthropic/text", prompt, request)
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[anthropic/text {COMPLETION_ID}\]",
        re.escape(f"Hello from the simulator. You said: {prompt}"),
        r"finish: stop \(\d+ tokens\)",
    )
    assert gateway.sim.seen(prompt.split()[0]), "the example's request never reached the upstream"


@pytest.mark.parametrize("client", CLIENTS)
def test_tool_calls_are_assembled_from_their_fragments(client: str, gateway: Any, request: Any) -> None:
    result = run(client, gateway.url, "openai/tools", marker(), request)
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[openai/tools {COMPLETION_ID}\]",
        r"Let me check\.",
        r'tool call: get_weather \{"city":"Paris","unit":"celsius"\} \(id \S+\)',
        r'tool call: get_time \{"timezone":"Europe/Paris"\} \(id \S+\)',
        r"finish: tool_calls \(\d+ tokens\)",
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_an_error_after_the_start_exits_1(client: str, gateway: Any, request: Any) -> None:
    result = run(client, gateway.url, "google/error-mid-stream", marker(), request)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(rf"\[google/error-mid-stream {COMPLETION_ID}\]", lines[0])
    assert lines[1] == "Hello from the simulator. "  # what arrived before the error
    assert lines[2].startswith("error: google/error-mid-stream ")


@pytest.mark.parametrize("client", CLIENTS)
def test_an_error_before_the_start_is_an_http_error_and_exits_2(client: str, gateway: Any, request: Any) -> None:
    result = run(client, gateway.url, "anthropic/http-400", marker(), request)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("HTTP 400: anthropic/http-400 returned HTTP 400")


@pytest.mark.parametrize("client", CLIENTS)
def test_no_gateway_listening_exits_2(client: str, request: Any) -> None:
    result = run(client, f"http://127.0.0.1:{free_port()}", "anthropic/text", marker(), request)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr


# ----------------------------------------------------------------------------- the Anthropic Messages door

MESSAGE_ID = "msg_req_[0-9a-f]{28}"
ANTHROPIC_CLIENTS = [pytest.param("python", id="python-anthropic"), pytest.param("node", id="node-anthropic")]


def run_messages(
    client: str, url: str, model: str, prompt: str, request: Any, *flags: str
) -> subprocess.CompletedProcess[str]:
    return run(client, url, model, prompt, request, "anthropic_messages", *flags)


@pytest.mark.parametrize("client", ANTHROPIC_CLIENTS)
def test_messages_text_streams_then_the_stop_reason(client: str, gateway: Any, request: Any) -> None:
    prompt = f'{marker()} "quoted" back\\slash'
    result = run_messages(client, gateway.url, "openai/text", prompt, request)
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[openai/text {MESSAGE_ID}\]",
        re.escape(f"Hello from the simulator. You said: {prompt}"),
        r"done: end_turn \(\d+ input, \d+ output, 0 cache read tokens\)",
    )
    assert gateway.sim.seen(prompt.split()[0]), "the example's request never reached the upstream"


@pytest.mark.parametrize("client", ANTHROPIC_CLIENTS)
def test_messages_tool_calls_print_when_complete(client: str, gateway: Any, request: Any) -> None:
    result = run_messages(client, gateway.url, "google/tools", marker(), request)
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[google/tools {MESSAGE_ID}\]",
        r"Let me check\.",
        r'tool call: get_weather \{"city":"Paris","unit":"celsius"\} \(id \S+\)',
        r'tool call: get_time \{"timezone":"Europe/Paris"\} \(id \S+\)',
        r"done: tool_use \(\d+ input, \d+ output, 0 cache read tokens\)",
    )


@pytest.mark.parametrize("client", ANTHROPIC_CLIENTS)
def test_messages_thinking_goes_back_signed_in_a_second_turn(client: str, gateway: Any, request: Any) -> None:
    prompt = marker()
    result = run_messages(client, gateway.url, "anthropic/thinking", prompt, request, "--thinking")
    assert result.returncode == 0, result.stderr
    turn = [
        rf"\[anthropic/thinking {MESSAGE_ID}\]",
        r"thinking: The user greets me\. I should greet back\.",
        r"Hello from the simulator\. You said: .*",
        r"done: end_turn \(\d+ input, \d+ output, 0 cache read tokens\)",
    ]
    assert_output(result.stdout, *turn, *turn)
    second = gateway.sim.seen(prompt)[-1]["body"]
    thinking = second["messages"][1]["content"][0]
    assert thinking["type"] == "thinking" and thinking["signature"] == "sig-sim-thinking-42"


@pytest.mark.parametrize("client", ANTHROPIC_CLIENTS)
def test_messages_error_after_the_start_exits_1(client: str, gateway: Any, request: Any) -> None:
    result = run_messages(client, gateway.url, "anthropic/error-mid-stream", marker(), request)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(rf"\[anthropic/error-mid-stream {MESSAGE_ID}\]", lines[0])
    assert lines[1] == "Hello from the simulator. "  # what arrived before the error
    assert lines[2].startswith("error: api_error: anthropic/error-mid-stream ")


@pytest.mark.parametrize("client", ANTHROPIC_CLIENTS)
def test_messages_error_before_the_start_is_an_http_error_and_exits_2(client: str, gateway: Any, request: Any) -> None:
    result = run_messages(client, gateway.url, "openai/http-400", marker(), request)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("HTTP 400: openai/http-400 returned HTTP 400")
