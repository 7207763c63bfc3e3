"""Demo mode (`make run`) teaches instead of hiding: a misspelled model gets the real unknown-model error, the
simulator's scenarios are listed as models, a vendor's plain id stays unambiguous, and the `tools` scenario calls
only the tools the request declares (app/catalog/demo_clouds.py, app/catalog/resolve.py, simulator/scenarios.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import marker, turn
from tests.procs import GatewayProcess


@pytest.fixture(scope="module")
def demo(sim):
    process = GatewayProcess(sim.url, GATEWAY_DEMO="1")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def complete(demo: GatewayProcess, body: dict) -> httpx.Response:
    return httpx.post(f"{demo.url}/v1/complete", json=body, timeout=60)


def test_a_misspelled_model_gets_the_unknown_model_error_and_reaches_no_simulator(demo):
    prompt = marker()
    response = complete(demo, turn("anthropic/claude-sonet-4-5", prompt))
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["type"] == "model_not_found" and "claude-sonet-4-5" in error["message"]
    assert httpx.get(f"{demo.url}/_simulator/_sim/requests", params={"contains": prompt}).json() == []


def test_the_simulators_scenarios_are_listed_and_served_with_their_parameters(demo):
    listed = {m["id"] for m in httpx.get(f"{demo.url}/v1/models").json()["data"]}
    assert {"anthropic/tools", "openai/thinking", "google/slow", "compat/text"} <= listed
    assert complete(demo, turn("anthropic/slow;n=3;delay_ms=1")).status_code == 200
    assert complete(demo, turn("vertex-claude/thinking")).status_code == 200  # the clouds' demo entries too


def test_a_vendors_plain_id_is_not_made_ambiguous_by_the_demos_cloud_entries(demo):
    response = complete(demo, turn("gpt-5"))
    assert response.status_code == 200, response.text
    assert response.json()["provider"] == "openai"


def test_the_tools_scenario_calls_only_the_tools_the_request_declares(demo):
    undeclared = complete(demo, turn("anthropic/tools"))
    assert undeclared.status_code == 200, undeclared.text
    message = undeclared.json()
    assert message["stopReason"] == "stop" and not [b for b in message["content"] if b["type"] == "toolCall"]
    assert "get_weather" in "".join(b.get("text", "") for b in message["content"])
    tool = {"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {}}}
    declared = complete(
        demo, turn("anthropic/tools", context={"messages": [{"role": "user", "content": "w"}], "tools": [tool]})
    )
    calls = [b["name"] for b in declared.json()["content"] if b["type"] == "toolCall"]
    assert calls == ["get_weather"] and declared.json()["stopReason"] == "toolUse"
