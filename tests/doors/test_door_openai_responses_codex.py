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
import openai
import pytest

from app.doors.openai_responses import compaction
from app.doors.openai_responses.events import ResponsesEncoder
from app.doors.openai_responses.request import decode
from tests.conformance import parse_sse
from tests.conftest import marker

CAPTURES = Path(__file__).parents[1] / "codex"
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
    """What makes the CLI fall back to HTTP at once (tests/agents/test_agent_codex.py runs the CLI itself)."""
    captured = capture(3)
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS - {"connection"}}
    response = gateway.http.get("/v1/responses", headers=headers)
    assert response.status_code == 426, response.text
    error = response.json()["error"]
    assert error["code"] == "websocket_not_supported" and "POST /v1/responses" in error["message"]
    assert gateway.http.get("/v1/responses").status_code == 405  # a plain GET is still no route of the door


def _body_with_marker(n: int, vendor: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    captured = capture(n)
    body = copy.deepcopy(captured["body"])
    m = marker()
    body["model"] = f"{vendor}/text"
    next(i for i in body["input"] if i.get("role") == "user" and "<environment_context>" not in json.dumps(i))[
        "content"].append({"type": "input_text", "text": m})  # fmt: skip
    headers = {k: v for k, v in captured["headers"].items() if k.lower() not in HOP_HEADERS}
    return m, body, headers


@pytest.mark.parametrize("vendor", VENDORS)
def test_remote_compaction_is_one_compaction_item_the_turns_model_wrote(gateway: Any, vendor: str) -> None:
    """Capture 5: the conversation, then a `compaction_trigger`. The vendor's model is asked for a summary (no
    tool called for it) and the answer is one `compaction` item holding it, as the CLI requires."""
    m, body, headers = _body_with_marker(5, vendor)
    response = gateway.http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 200, response.text
    events = [(frame.event, json.loads(frame.data)) for frame in parse_sse(response.text)]
    assert [kind for kind, _ in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.compaction.compacting",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    item = events[4][1]["item"]
    assert item["type"] == "compaction" and item["id"].startswith("cmp_")
    assert events[5][1]["response"]["output"] == [item]
    summary = compaction.unwrap_summary(item["encrypted_content"])
    assert summary is not None and summary.startswith("Hello from the simulator. You said: Context compaction:")
    (upstream,) = gateway.sim.seen(m)
    sent = json.dumps(upstream["body"])
    assert compaction.PROMPT[:60] in sent and "compaction_trigger" not in sent
    assert {"anthropic": '"tool_choice": {"type": "none"}', "openai": '"tool_choice": "none"',
            "google": '"mode": "NONE"'}[vendor] in sent  # fmt: skip


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_compaction_item_brings_its_summary_to_the_vendor(gateway: Any, vendor: str) -> None:
    """Capture 6: the user messages kept, then the compaction item (here one the gateway made)."""
    m, body, headers = _body_with_marker(6, vendor)
    summary = f"The user asked to run a command; it printed {marker()}."
    body["input"][-1]["encrypted_content"] = compaction.wrap_summary(summary)
    response = gateway.http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 200, response.text
    (upstream,) = gateway.sim.seen(m)
    assert json.dumps(compaction.SUMMARY_PREFIX + summary)[1:-1] in json.dumps(upstream["body"])


def test_a_compaction_item_the_gateway_did_not_make_is_refused(gateway: Any) -> None:
    _, body, headers = _body_with_marker(6, "openai")  # as captured: the stand-in's own encrypted_content
    response = gateway.http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == f"input.{len(body['input']) - 1}.encrypted_content"


def test_a_compaction_trigger_must_be_the_last_input_item(gateway: Any) -> None:
    _, body, headers = _body_with_marker(5, "openai")
    body["input"].insert(3, {"type": "compaction_trigger"})
    response = gateway.http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 400 and response.json()["error"]["param"] == "input.3.type", response.text


def test_remote_compaction_without_streaming_answers_the_compaction_item(gateway: Any) -> None:
    _, body, headers = _body_with_marker(5, "anthropic")
    body["stream"] = False
    response = gateway.http.post("/v1/responses", json=body, headers=headers)
    assert response.status_code == 200, response.text
    (item,) = response.json()["output"]
    assert item["type"] == "compaction" and compaction.unwrap_summary(item["encrypted_content"])


def _frames(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


def test_a_namespace_tool_group_reaches_the_vendor_as_function_tools_and_its_calls_carry_the_namespace() -> None:
    """Codex's `multi_agent_v1` group: each function goes to the vendor as `multi_agent_v1__<name>`; a call of
    one comes back as a function_call with the function's own `name` and its `namespace` (without it, the CLI
    answers "unsupported call"), and such a call sent back reaches the vendor under the same name."""
    body = copy.deepcopy(capture(2)["body"])
    body["input"] += [
        {"type": "function_call", "call_id": "call_ns", "namespace": "multi_agent_v1", "name": "wait_agent",
         "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_ns", "output": "done"},
    ]  # fmt: skip
    request = decode(body)
    names = [tool.name for tool in request.unified.context.tools or []]
    assert [n for n in names if n.startswith("multi_agent_v1__")] == [
        "multi_agent_v1__close_agent", "multi_agent_v1__resume_agent", "multi_agent_v1__send_input",
        "multi_agent_v1__spawn_agent", "multi_agent_v1__wait_agent",
    ]  # fmt: skip
    # Its `web_search` (cached results only) goes to the adapters as a hosted tool; the serving vendor's search
    # runs it where the catalog allows (tests/providers/test_hosted_tools.py), otherwise the turn names it dropped.
    assert request.response_headers is None
    assert request.unified.options.hosted_tools.web_search.external_web_access is False
    calls = [block for message in request.unified.context.messages if message.role == "assistant"
             for block in message.content if block.type == "toolCall"]  # fmt: skip
    assert [call.name for call in calls] == ["exec_command", "multi_agent_v1__wait_agent"]

    encoder = ResponsesEncoder("req_ns", request, None)
    call = {"id": "toolu_9", "name": "multi_agent_v1__spawn_agent", "arguments": {"message": "go"}}
    out = _frames(encoder.encode({"type": "start", "provider": "anthropic", "api": "anthropic-messages", "model": "m"}))
    out += _frames(
        encoder.encode({"type": "toolcall_start", "contentIndex": 0, "id": "toolu_9", "toolName": call["name"]})
    )
    out += _frames(encoder.encode({"type": "toolcall_end", "contentIndex": 0, "toolCall": call}))
    message = {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "m",
               "stopReason": "toolUse", "content": [{"type": "toolCall", **call}]}  # fmt: skip
    out += _frames(encoder.encode({"type": "done", "reason": "toolUse", "usage": {}, "message": message}))
    items = [f["item"] for f in out if f["type"].startswith("response.output_item.")] + out[-1]["response"]["output"]
    assert [(i["name"], i["namespace"]) for i in items] == [("spawn_agent", "multi_agent_v1")] * 3


@pytest.mark.parametrize("vendor", VENDORS)
def test_codexs_namespaced_tools_reach_every_vendor(gateway: Any, vendor: str) -> None:
    _, response, upstream = send(gateway, 1, vendor)
    assert response.headers["X-Gateway-Dropped-Tools"] == "web_search"
    tools = json.dumps(upstream["body"]["tools"])
    assert "multi_agent_v1__spawn_agent" in tools and "Tools for spawning and managing sub-agents." in tools


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_sdks_compact_call_gets_the_user_messages_and_a_compaction_item(gateway: Any, vendor: str) -> None:
    """`POST /v1/responses/compact` (OpenAI's first remote compaction) through the official SDK: the answer lists
    the input's user messages, then one compaction item the vendor's model wrote, which a later turn reads."""
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=30)
    m = marker()
    compacted = client.responses.compact(model=f"{vendor}/text", input=[
        {"role": "user", "content": f"Remember {m}."},
        {"role": "assistant", "content": "Noted."},
    ])  # fmt: skip
    assert compacted.object == "response.compaction" and compacted.usage.total_tokens > 0
    user, item = compacted.output
    assert (user.type, user.role) == ("message", "user") and m in json.dumps(user.model_dump())
    assert item.type == "compaction"
    summary = compaction.unwrap_summary(item.encrypted_content)
    assert summary is not None and summary.startswith("Hello from the simulator. You said: Context compaction:")
    (upstream,) = gateway.sim.seen(m)
    assert upstream["vendor"] == vendor and compaction.PROMPT[:60] in json.dumps(upstream["body"])
    later = client.responses.create(model=f"{vendor}/text", input=[*[o.model_dump(exclude_none=True) for o in compacted.output],
                                                                   {"role": "user", "content": f"Go on {m}."}])  # fmt: skip
    assert later.status == "completed"
    (seen,) = gateway.sim.seen(f"Go on {m}.")
    assert seen["vendor"] == vendor and compaction.SUMMARY_PREFIX[:40] in json.dumps(seen["body"])


def test_compact_refuses_a_previous_response_id_and_streaming(gateway: Any) -> None:
    for extra, param in (({"previous_response_id": "resp_x"}, "previous_response_id"), ({"stream": True}, "stream")):
        response = gateway.http.post("/v1/responses/compact", json={"model": "openai/text", "input": "hi", **extra})
        assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text
