"""Demo mode (`make run`) teaches instead of hiding: a misspelled model gets the real unknown-model error, the
simulator's scenarios are listed as models, a vendor's plain id stays unambiguous, and the `tools` scenario calls
only the tools the request declares (app/catalog/demo_clouds.py, app/catalog/resolve.py, simulator/scenarios.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import marker, turn
from tests.procs import GatewayProcess


@pytest.fixture(scope="module")
def demo(sim):
    with GatewayProcess(sim.url, GATEWAY_DEMO="1") as process:
        yield process


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


def test_demo_mode_sends_every_provider_to_the_simulator_and_removes_its_credentials_on_exit(sim, tmp_path):
    """An operator's provider with its key set and its own base URL, a built-in one with a key in the
    environment and a local server with GATEWAY_<NAME>_BASE_URL: in demo mode every one is served by the
    simulator, as start-up says. The folder with the demo's generated service-account key is gone on exit."""
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "name": "mine",
                        "api": "openai-completions",
                        "keyEnv": "MINE_KEY",
                        "baseUrl": "http://127.0.0.1:9/v1",
                    }
                ],
                "models": [{"provider": "mine", "id": "mine-1"}],
            }
        )
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = GatewayProcess(
        sim.url,
        GATEWAY_DEMO="1",
        GATEWAY_LOG_LEVEL="info",
        GATEWAY_CATALOG=str(catalog),
        MINE_KEY="sk-mine",
        GROQ_API_KEY="gsk-real",
        GATEWAY_VLLM_BASE_URL="http://127.0.0.1:9/v1",
        TMPDIR=str(temp),
    )
    try:
        proc.wait_ready()
        assert [p.name for p in temp.iterdir() if p.name.startswith("gateway-demo-clouds-")]
        for model in ("mine/mine-1", "groq/llama-3.3-70b-versatile", "vllm/any-local-model"):
            assert complete(proc, turn(model)).status_code == 200, model
    finally:
        proc.proc.terminate()
        proc.proc.wait(60)
    lines = [json.loads(line) for line in proc.proc.stderr.read().decode().splitlines() if line.strip()]
    served = {line["provider"]: line for line in lines if line["logger"] == "gateway.providers" and "provider" in line}
    for name in ("mine", "groq", "vllm", "anthropic", "openai", "google", "compat"):
        assert served[name]["simulator"] is True, served[name]["msg"]
    assert not [p.name for p in temp.iterdir() if p.name.startswith("gateway-demo-clouds-")]


def test_demo_mode_refuses_to_start_with_a_cloud_provider_the_simulator_does_not_serve(sim, tmp_path):
    catalog = tmp_path / "catalog.json"
    catalog.write_text(
        json.dumps(
            {
                "providers": [
                    {
                        "name": "my-bedrock",
                        "api": "anthropic-messages",
                        "cloud": {"kind": "bedrock", "region": "eu-west-1"},
                    }
                ]
            }
        )
    )
    proc = GatewayProcess(sim.url, GATEWAY_DEMO="1", GATEWAY_CATALOG=str(catalog))
    assert proc.proc.wait(180) == 3
    lines = [json.loads(line)["msg"] for line in proc.proc.stderr.read().decode().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("start-up failed: ")]
    assert len(errors) == 1 and "my-bedrock would call a real cloud" in errors[0], errors
    assert "GATEWAY_DEMO=0" in errors[0]
