"""The streaming clients in examples/ run against the rig's gateway and print exactly what they promise: text
as it streams, tool calls when complete, then the stop reason or the error, with their exit status (0 done,
1 error event, 2 HTTP or connection error)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import marker
from tests.procs import free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NODE = shutil.which("node")
CURL_AND_JQ = shutil.which("curl") and shutil.which("jq")
REQUEST_ID = "req_[0-9a-f]{28}"

CLIENTS = [
    pytest.param("python", id="python-httpx"),
    pytest.param("node", id="node-fetch", marks=pytest.mark.skipif(NODE is None, reason="node is not installed")),
    pytest.param("curl", id="curl-jq", marks=pytest.mark.skipif(not CURL_AND_JQ, reason="curl.sh needs curl and jq")),
]


def run_client(
    client: str, url: str, model: str, prompt: str, path: str = "/usr/bin:/bin"
) -> subprocess.CompletedProcess[str]:
    if client == "curl":
        command = [shutil.which("bash") or "bash", str(EXAMPLES / "curl.sh"), prompt]
    elif client == "python":
        command = [sys.executable, str(EXAMPLES / "stream.py"), "--url", url, "--model", model, prompt]
    else:
        command = [NODE or "node", str(EXAMPLES / "stream.mjs"), "--url", url, "--model", model, prompt]
    env = {"PATH": path, "GATEWAY_URL": url, "MODEL": model, "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def done_line(client: str, reason: str) -> str:
    """curl.sh prints the tokens; the programs the cost too."""
    return rf"done: {reason} \(\d+ tokens\)" if client == "curl" else rf"done: {reason} \(\d+ tokens, \$\d+\.\d{{6}}\)"


def assert_output(text: str, *lines: str) -> None:
    """`text` is exactly these lines (regular expressions), each ended by a newline."""
    pattern = "".join(line + "\n" for line in lines)
    assert re.fullmatch(pattern, text), f"expected:\n{pattern}\ngot:\n{text}"


@pytest.mark.parametrize("client", CLIENTS)
def test_text_streams_and_ends_with_the_stop_reason(client: str, gateway: Any) -> None:
    prompt = f'{marker()} "quoted" back\\slash'
    result = run_client(client, gateway.url, "anthropic/text", prompt)
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[anthropic/text {REQUEST_ID}\]",
        re.escape(f"Hello from the simulator. You said: {prompt}"),
        done_line(client, "stop"),
    )
    assert result.stderr == ""
    assert gateway.sim.seen(prompt.split()[0]), "the example's request never reached the upstream"


@pytest.mark.parametrize("client", CLIENTS)
def test_tool_calls_print_when_complete(client: str, gateway: Any) -> None:
    result = run_client(client, gateway.url, "anthropic/tools", marker())
    assert result.returncode == 0, result.stderr
    assert_output(
        result.stdout,
        rf"\[anthropic/tools {REQUEST_ID}\]",
        r"Let me check\.",
        re.escape('tool call: get_weather {"city":"Paris","unit":"celsius"} (id toolu_sim_weather)'),
        re.escape('tool call: get_time {"timezone":"Europe/Paris"} (id toolu_sim_time)'),
        done_line(client, "toolUse"),
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_error_event_is_printed_and_exits_1(client: str, gateway: Any) -> None:
    result = run_client(client, gateway.url, "anthropic/error-mid-stream", marker())
    assert result.returncode == 1, result.stdout + result.stderr
    assert_output(
        result.stdout,
        rf"\[anthropic/error-mid-stream {REQUEST_ID}\]",
        r"Hello from the simulator\. ",  # the content that arrived before the error
        re.escape("error: error: anthropic/error-mid-stream sent an error event: overloaded_error: Overloaded"),
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_http_error_before_streaming_exits_2(client: str, gateway: Any) -> None:
    result = run_client(client, gateway.url, "nosuchprovider/model", marker())
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    if client == "curl":
        assert result.stderr.splitlines()[-1].startswith("HTTP error: model_not_found: nosuchprovider/model")
    else:
        assert result.stderr.startswith('HTTP 404: {"error":{"type":"model_not_found"')


@pytest.mark.parametrize("client", CLIENTS)
def test_no_gateway_listening_exits_2(client: str) -> None:
    result = run_client(client, f"http://127.0.0.1:{free_port()}", "anthropic/text", marker())
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr


@pytest.mark.skipif(not shutil.which("curl"), reason="curl.sh needs curl")
def test_curl_example_without_jq_prints_each_event_once(gateway: Any, tmp_path: Path) -> None:
    for tool in ("curl", "sed", "cat"):  # a PATH without jq
        (tmp_path / tool).symlink_to(shutil.which(tool))
    prompt = marker()
    text = run_client("curl", gateway.url, "anthropic/text", prompt, path=str(tmp_path))
    assert text.returncode == 0, text.stderr
    events = [json.loads(line) for line in text.stdout.splitlines()]
    types = [event["type"] for event in events]
    assert types[:2] == ["start", "text_start"] and types[-2:] == ["text_end", "done"], types
    assert set(types[2:-2]) == {"text_delta"}  # as many as the gateway sent, each printed once
    assert "".join(e["delta"] for e in events[2:-2]) == f"Hello from the simulator. You said: {prompt}"
    error = run_client("curl", gateway.url, "anthropic/error-mid-stream", marker(), path=str(tmp_path))
    assert error.returncode == 1 and error.stdout.splitlines()[-1].startswith('{"type":"error"')
    missing = run_client("curl", gateway.url, "nosuchprovider/model", marker(), path=str(tmp_path))
    assert missing.returncode == 2 and missing.stdout.startswith('{"error":{"type":"model_not_found"')


def test_the_python_examples_say_to_run_them_with_the_venvs_python():
    """The SDKs and httpx are installed in `.venv` (`make venv`), not for the system's `python`."""
    for example in sorted(EXAMPLES.glob("*.py")):
        usage = [
            line
            for line in example.read_text().splitlines()
            if re.search(rf"python\S* examples/{re.escape(example.name)}", line)
        ]
        assert usage, f"{example.name} shows no usage line"
        wrong = [
            line for line in usage if not re.search(rf"\.venv/bin/python examples/{re.escape(example.name)}", line)
        ]
        assert not wrong, f"{example.name}: run it with .venv/bin/python: {wrong}"
