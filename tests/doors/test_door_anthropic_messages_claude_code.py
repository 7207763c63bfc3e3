"""Claude Code's own requests through the Messages door, to every vendor, over loopback against the simulator.

`tests/claude_code/claude-code-N.json` are the exact bodies and headers the published Claude Code CLI (2.1.332)
sent (`tests/claude_code/README.md` says how they were captured): `POST /v1/messages?beta=true` with a
`role: "system"` message inside `messages`, adaptive thinking with `display`, `output_config.effort`,
`context_management`, a `defer_loading` tool, `cache_control` breakpoints and nine `anthropic-beta` flags. Each
is sent as captured (the model renamed to a simulator model, a marker added to find the upstream call) and
must be answered; then the upstream request shows each field carried as its vendor takes it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import parse_sse
from tests.conftest import marker

CAPTURES = Path(__file__).parents[1] / "claude_code"
PROVIDERS = ["anthropic", "openai", "google", "compat"]
# Headers the captures carry that belong to the connection, not the request (or hold the redacted key).
HOP_HEADERS = {"host", "content-length", "connection", "x-api-key", "accept-encoding"}


def capture(n: int) -> dict[str, Any]:
    return json.loads((CAPTURES / f"claude-code-{n}.json").read_text())


@pytest.fixture(scope="module")
def gateway(gateway_factory: Any) -> Any:
    return gateway_factory(throttle_ms=0)


def send(gateway: Any, n: int, provider: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Capture `n` sent to `provider`: the marker, the captured body as sent, and the upstream request."""
    captured = capture(n)
    body = copy.deepcopy(captured["body"])
    m = marker()
    body["model"] = f"{provider}/text"
    body["messages"][0]["content"].append({"type": "text", "text": m})
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS}
    response = gateway.http.post(captured["path"], json=body, headers=headers)
    assert response.status_code == 200, response.text
    frames = parse_sse(response.text)
    assert frames[-1].event == "message_stop", response.text[-500:]
    (upstream,) = gateway.sim.seen(m)
    return m, body, upstream


def test_the_captures_are_claude_codes_beta_requests():
    for n in range(1, 9):
        captured = capture(n)
        assert captured["path"] == "/v1/messages?beta=true"
        assert captured["headers"]["User-Agent"].startswith("claude-cli/")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("n", range(1, 9))
def test_every_claude_code_request_is_answered_on_every_vendor(gateway, provider, n):
    send(gateway, n, provider)


def _environment_text(body: dict[str, Any]) -> str:
    system = next(m for m in body["messages"] if m["role"] == "system")
    content = system["content"]
    return content if isinstance(content, str) else "\n\n".join(b["text"] for b in content)


def test_to_anthropic_every_field_goes_as_claude_code_sent_it(gateway):
    _, body, upstream = send(gateway, 2, "anthropic")
    sent = upstream["body"]
    headers = capture(2)["headers"]
    assert upstream["headers"]["anthropic-beta"] == headers["anthropic-beta"]
    assert [m["role"] for m in sent["messages"]] == ["user", "system", "assistant", "user"]
    system_message = sent["messages"][1]
    assert "".join(b["text"] for b in system_message["content"]) == _environment_text(body)
    assert system_message["output_config"] == body["messages"][1]["output_config"]
    # The client's breakpoints, where it put them, and none of the adapter's own.
    assert sent["system"] == body["system"]
    assert sent["messages"][3]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in sent["messages"][0]["content"][-1]
    for field in ("thinking", "output_config", "context_management", "tools", "metadata"):
        assert sent[field] == body[field], field


def test_to_openai_a_system_message_is_a_developer_item_at_its_position(gateway):
    _, body, upstream = send(gateway, 2, "openai")
    items = upstream["body"]["input"]
    roles = [i.get("role") or i.get("type") for i in items]
    assert roles == ["user", "developer", "function_call", "function_call_output"]
    assert items[1]["content"] == _environment_text(body)
    assert upstream["body"]["reasoning"]["effort"] == "medium"
    names = {t["name"] for t in upstream["body"]["tools"]}
    assert "DeferredToolPlaceholder" not in names and {"Bash", "ToolSearch"} <= names


def test_to_chat_completions_a_system_message_stays_at_its_position(gateway):
    _, body, upstream = send(gateway, 2, "compat")
    messages = upstream["body"]["messages"]
    instruction = messages[0]["role"]  # the vendor's role for instructions (`developer` or `system`)
    assert [m["role"] for m in messages] == [instruction, "user", instruction, "assistant", "tool"]
    assert messages[2]["content"] == _environment_text(body)
    assert "DeferredToolPlaceholder" not in {t["function"]["name"] for t in upstream["body"]["tools"]}


def test_to_gemini_a_system_message_joins_the_system_instruction(gateway):
    _, body, upstream = send(gateway, 2, "google")
    parts = [p["text"] for p in upstream["body"]["systemInstruction"]["parts"]]
    assert parts[-1] == _environment_text(body)
    assert [c["role"] for c in upstream["body"]["contents"]] == ["user", "model", "user"]
    declared = {d["name"] for t in upstream["body"]["tools"] for d in t["functionDeclarations"]}
    assert "DeferredToolPlaceholder" not in declared


@pytest.mark.parametrize("provider", PROVIDERS)
def test_signed_thinking_claude_code_sends_back_is_answered(gateway, provider):
    """Capture 8 carries a thinking block with a signature that no gateway gave (the capture's stand-in
    server signed it): foreign, so it is never replayed as a signature; the turn is answered."""
    _, _, upstream = send(gateway, 8, provider)
    assert "sig-capture-0001" not in json.dumps(upstream["body"])


ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_output_config_format_reaches_each_vendors_structured_output(gateway, provider):
    captured = capture(1)
    body = copy.deepcopy(captured["body"])
    m = marker()
    body.update(
        model=f"{provider}/text",
        output_config={"effort": "low", "format": {"type": "json_schema", "schema": ANSWER_SCHEMA}},
    )
    body["messages"][0]["content"].append({"type": "text", "text": m})
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS}
    response = gateway.http.post(captured["path"], json=body, headers=headers)
    assert response.status_code == 200, response.text
    sent = gateway.sim.seen(m)[0]["body"]
    if provider == "anthropic":
        assert sent["output_config"] == body["output_config"]
    elif provider == "openai":
        assert sent["text"]["format"]["type"] == "json_schema" and sent["text"]["format"]["schema"] == ANSWER_SCHEMA
    elif provider == "google":
        config = sent["generationConfig"]
        assert config["responseMimeType"] == "application/json" and config["responseJsonSchema"] == ANSWER_SCHEMA
    else:
        assert sent["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": ANSWER_SCHEMA},
        }
