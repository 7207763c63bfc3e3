"""The Codex CLI's own requests through the Responses door, to every vendor, over loopback against the simulator.

`tests/codex/codex-N.json` are the exact bodies and headers the published Codex CLI (0.171.0) sent
(`tests/codex/README.md` says how they were captured): developer messages as the instructions, input items with
ids and the CLI's metadata, function tools with a namespace group and a hosted `web_search`, `client_metadata`,
`store: false`, `include: ["reasoning.encrypted_content"]`. Each is sent as captured (the model renamed to a
simulator model, a marker added to find the upstream call) and must be answered; then the upstream request shows
what each field became.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance import parse_sse
from tests.conftest import marker

CAPTURES = Path(__file__).parent / "codex"
VENDORS = ["anthropic", "openai", "google"]
TURNS = [1, 2, 4, 7, 8, 9]  # the captured turns (3 is the WebSocket attempt; 5 and 6 are remote compaction)
# Headers the captures carry that belong to the connection, not the request (or hold the redacted key).
HOP_HEADERS = {"host", "content-length", "connection", "authorization", "accept-encoding"}


def capture(n: int) -> dict[str, Any]:
    return json.loads((CAPTURES / f"codex-{n}.json").read_text())


@pytest.fixture(scope="module")
def gateway(gateway_factory: Any) -> Any:
    return gateway_factory(throttle_ms=0)


def send(gateway: Any, n: int, vendor: str, scenario: str = "text") -> tuple[str, httpx.Response, dict[str, Any]]:
    """Capture `n` sent to `vendor`: the marker (in its last user message), the answer, and the upstream request."""
    captured = capture(n)
    body = copy.deepcopy(captured["body"])
    m = marker()
    body["model"] = f"{vendor}/{scenario}"
    users = [item for item in body["input"] if item.get("role") == "user"]
    users[-1]["content"].append({"type": "input_text", "text": m})
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS}
    response = gateway.http.post(captured["path"], json=body, headers=headers)
    assert response.status_code == 200, response.text
    (upstream,) = gateway.sim.seen(m)
    return m, response, upstream


def test_the_captures_are_codex_exec_requests() -> None:
    for n in TURNS:
        captured = capture(n)
        assert (captured["method"], captured["path"]) == ("POST", "/v1/responses")
        assert captured["headers"]["user-agent"].startswith("codex_exec/0.171.0")
        assert captured["body"]["stream"] is True and captured["body"]["store"] is False
    assert capture(3)["headers"]["Upgrade"] == "websocket"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("n", TURNS)
def test_every_codex_turn_is_answered_on_every_vendor(gateway: Any, vendor: str, n: int) -> None:
    _, response, _ = send(gateway, n, vendor)
    events = [frame.event for frame in parse_sse(response.text)]
    assert events[0] == "response.created" and events[-1] == "response.completed", events


def test_the_websocket_upgrade_is_refused_with_426_in_openais_shape(gateway: Any) -> None:
    """What makes the CLI fall back to HTTP at once (tests/test_agent_codex.py runs the CLI itself)."""
    captured = capture(3)
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS - {"connection"}}
    response = gateway.http.get("/v1/responses", headers=headers)
    assert response.status_code == 426, response.text
    error = response.json()["error"]
    assert error["code"] == "websocket_not_supported" and "POST /v1/responses" in error["message"]
    assert gateway.http.get("/v1/responses").status_code == 405  # a plain GET is still no route of the door
