"""Demo mode (`make run`) lists a Bedrock Claude, a Vertex AI Claude, a Vertex AI Gemini and an Azure OpenAI provider, served by
the built-in simulator with test credentials made for the process (app/catalog/demo_clouds.py): a real
`python -m app` in demo mode streams from each, through the clouds' SDKs, tokens and paths."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.procs import GatewayProcess


@pytest.fixture(scope="module")
def demo(sim):
    with GatewayProcess(sim.url, GATEWAY_DEMO="1") as process:
        yield process


@pytest.mark.parametrize(
    ("model", "cloud", "region"),
    [
        ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock", "us-east-1"),
        ("vertex-claude/claude-sonnet-4-5@20250929", "vertex", "us-east5"),
        ("vertex-gemini/gemini-2.5-pro", "vertex", "global"),
        ("azure-openai/gpt-5", "azure", "eastus"),
    ],
)
def test_demo_mode_serves_each_cloud_entry_from_the_simulator(demo, model, cloud, region):
    with httpx.Client(base_url=demo.url, timeout=30) as client:
        models = {m["id"] for m in client.get("/v1/models").json()["data"]}
        assert model in models
        response = client.post(
            "/v1/stream", json={"model": model, "context": {"messages": [{"role": "user", "content": "hi"}]}}
        )
        assert response.status_code == 200
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        assert events[-1]["type"] == "done", response.text
        request_id = response.headers["x-request-id"]
        deadline = time.monotonic() + 10
        record = client.get(f"/v1/requests/{request_id}").json()
        while record["settledAt"] is None and time.monotonic() < deadline:  # the ledger writes behind the stream
            time.sleep(0.05)
            record = client.get(f"/v1/requests/{request_id}").json()
        assert (record["cloud"], record["region"]) == (cloud, region)
