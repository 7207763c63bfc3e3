"""JavaScript clients of the Responses door, pinned in tests/agents/package-lock.json, against the gateway in
front of the simulator speaking Anthropic, OpenAI and Gemini:

- the official `openai` Node SDK (tests/agents/openai_responses.mjs): `responses.create` streamed and not, a tool
  loop whose history the client keeps, and a `previous_response_id` loop with `store: true` whose second request
  goes to another gateway replica on the same ledger database;
- the AI SDK's `@ai-sdk/openai` Responses provider (`openai.responses(model)`, tests/agents/ai_sdk_turn.mjs):
  streamText with tools, and a stream cut inside a tool call's arguments, of which no call reaches the client.

The simulator's `agent-tool` scenario calls `Bash` with `cat proof.txt`, then answers the turn carrying the
tool's result with that result's text: the loop worked only if the text comes back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, NODE, npm_folder
from tests.conftest import marker
from tests.agents.test_agent_ai_sdk import ai_sdk_turn

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-node-0001"
SCRIPT = AGENTS / "openai_responses.mjs"
BASH_CALL = {"command": "cat proof.txt", "description": "Show the proof file"}


@pytest.fixture(scope="module")
def agents() -> Path:
    npm_folder(AGENTS, "openai")
    return npm_folder(AGENTS, "@ai-sdk/openai")


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"node:{KEY}")


def node_sdk(mode: str, url: str, model: str, prompt: str, url2: str | None = None) -> list[dict[str, Any]]:
    args = [NODE or "node", str(SCRIPT), "--mode", mode, "--url", url, "--model", model, "--key", KEY]
    done = subprocess.run(
        [*args, *(["--url2", url2] if url2 else []), prompt],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines and lines[-1] == {"type": "done"}, done.stdout + done.stderr
    assert not [line for line in lines if line["type"] == "thrown"], lines
    return lines[:-1]


# ---------------------------------------------------------------------------------------------- openai (Node)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_node_sdk_reads_an_answer_streamed_and_not(gw, agents, vendor):
    m = marker()
    whole, streamed = node_sdk("text", gw.url, f"{vendor}/text", m)
    assert whole["status"] == "completed" and whole["text"] == f"Hello from the simulator. You said: {m}"
    assert whole["usage"]["input_tokens"] > 0 and whole["usage"]["output_tokens"] > 0
    assert "Be brief." in json.dumps(gw.sim.seen(m)[0]["body"])
    kinds = [e["type"] for e in streamed["events"]]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e["sequence"] for e in streamed["events"]] == list(range(len(kinds)))
    assert streamed["deltas"] == streamed["text"] == whole["text"] and streamed["status"] == "completed"


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_node_sdk_runs_a_tool_loop_keeping_the_history_itself(gw, agents, vendor):
    m = marker()
    first, call, second = node_sdk("tools", gw.url, f"{vendor}/agent-tool", m)
    assert first["status"] == "completed" and first["text"] == "Let me look."
    assert call["name"] == "Bash" and call["arguments"] == BASH_CALL
    assert second["status"] == "completed" and second["text"] == f"The tool said: ran: {m}"
    # The second request carried the call and its output back to the vendor, under the same call id (Gemini's
    # calls have no id on its wire: the gateway names them, and pairs call and result by position).
    sent = json.dumps([e["body"] for e in gw.sim.seen(f"ran: {m}") if e["vendor"] == vendor][-1])
    assert call["callId"].split("|")[0] in sent or vendor == "google"


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_node_sdk_continues_a_stored_response_on_another_replica(ledger_gateway, agents, vendor):
    keys = f"node:{KEY}"
    first_replica, second_replica = (
        ledger_gateway(api_keys=keys, throttle_ms=0),
        ledger_gateway(api_keys=keys, throttle_ms=0),
    )
    m = marker()
    first, call, second, retrieved = node_sdk(
        "chain", first_replica.url, f"{vendor}/agent-tool", m, url2=second_replica.url
    )
    assert first["store"] is True and call["arguments"] == BASH_CALL
    assert second["status"] == "completed" and second["previous"] == first["id"]
    assert second["text"] == f"The tool said: ran: {m}"  # the stored call met its output on the other replica
    sent = json.dumps([e["body"] for e in second_replica.sim.seen(f"ran: {m}") if e["vendor"] == vendor][-1])
    assert m in sent  # the first request's prompt came from the store
    assert retrieved == {"type": "retrieved", "id": first["id"], "status": "completed"}


# ---------------------------------------------------------------------------------------------- AI SDK (Responses)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_ai_sdk_responses_provider_runs_complete_tool_calls(gateway, agents, vendor):
    got = ai_sdk_turn(gateway, "responses", f"{vendor}/tools")
    assert got["errors"] == [] and got["finish"] == ["tool-calls"]
    assert [(c["name"], c["input"]) for c in got["executed"]] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_time", {"timezone": "Europe/Paris"})
    ]  # fmt: skip
    assert [c["id"] for c in got["calls"]] == [c["id"] for c in got["executed"]]


# A stream cut inside the first call's arguments (get_weather): the connection lost, the vendor's in-band error,
# the token limit. Gemini sends a call whole, so a cut there falls before the call.
CUTS = [
    ("anthropic", "tools;fault=reset;at=toolargs"),
    ("openai", "tools;fault=error_event;at=toolargs"),
    ("openai", "tool-max-tokens"),
    ("anthropic", "tool-max-tokens"),
    ("google", "tools;fault=reset;at=toolargs"),
]


@pytest.mark.parametrize(("vendor", "scenario"), CUTS)
def test_a_call_cut_inside_its_arguments_never_reaches_the_ai_sdk_responses_provider(gateway, agents, vendor, scenario):
    got = ai_sdk_turn(gateway, "responses", f"{vendor}/{scenario}")
    assert got["calls"] == [] and got["executed"] == []
    assert got["finish"] == ["error"] and got["errors"], got
