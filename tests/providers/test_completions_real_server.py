"""The openai-completions adapter against a real OpenAI-compatible server this project did not write:
`fakellm` (a dev dependency: a FastAPI server speaking Chat Completions with scripted answers instead of a
model), started as its own process on loopback. Text and a tool call stream through the gateway."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.conftest import marker, turn
from tests.procs import free_port

RULES = """
rules:
  - name: weather_call
    when:
      messages_contain: "weather in Paris"
    respond:
      tool_calls:
        - name: get_weather
          arguments: {city: "Paris", unit: "celsius"}
  - name: greeting
    when:
      messages_contain: "say hello"
    respond:
      content: "Hello from a server we did not write."
"""


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = tmp_path_factory.mktemp("fakellm") / "fakellm.yaml"
    config.write_text(RULES)
    port = free_port()
    executable = Path(sys.executable).with_name("fakellm")
    proc = subprocess.Popen(
        [str(executable), "serve", "--port", str(port), "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"fakellm exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            try:
                if httpx.get(f"{url}/_fakellm/stats", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("fakellm did not start")
            time.sleep(0.1)  # polling a starting process, not synchronising the test
        yield f"{url}/v1"
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def local_gateway(gateway_factory, fakellm, tmp_path_factory):
    catalog = tmp_path_factory.mktemp("catalog") / "catalog.json"
    catalog.write_text(
        '{"providers": [{"name": "local", "api": "openai-completions", '
        '"compat": {"maxTokensField": "max_tokens", "developerRole": false}}]}'
    )
    return gateway_factory(catalog=str(catalog), base_urls={"local": fakellm})


def test_text_streams_from_a_real_server(local_gateway):
    result = local_gateway.stream(turn("local/qwen/qwen3-0.6b", f"please say hello {marker()}"))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert result.terminal["reason"] == "stop"
    assert result.message["content"] == [{"type": "text", "text": "Hello from a server we did not write."}]
    assert len([e for e in result.events if e["type"] == "text_delta"]) > 1  # it streamed word by word


def test_a_tool_call_streams_from_a_real_server(local_gateway):
    body = turn("local/qwen/qwen3-0.6b", f"what is the weather in Paris? {marker()}")
    body["context"]["tools"] = [
        {
            "name": "get_weather",
            "description": "weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    result = local_gateway.stream(body)
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert result.terminal["reason"] == "toolUse"
    [call] = [b for b in result.message["content"] if b["type"] == "toolCall"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris", "unit": "celsius"}
    assert call["id"].startswith("call_")
    assert len([e for e in result.events if e["type"] == "toolcall_delta"]) > 1  # arguments came in fragments
