"""Azure OpenAI (CONTRACT §9a, docs/clouds/azure.md): `openai-responses` and `openai-completions` on an Azure
resource through the official `openai` SDK inside the gateway, on the v1 path and the dated `api-version`
path, against the simulator's Azure (`simulator/azure.py`) over loopback HTTP. The gateways: conftest.py; what
every cloud does alike (throttling, a client that leaves, expiring tokens): test_clouds.py."""

from __future__ import annotations

import json

import pytest

from simulator.azure import AZURE_KEY
from tests.conftest import marker, turn
from tests.providers.clouds.conftest import BAD_KEY, PATHS, SERVED, VERSION, azure_seen, record


@pytest.mark.parametrize("name", SERVED)
def test_a_text_turn_goes_to_azures_path_with_its_auth_and_the_record_names_azure(azure, name):
    m = marker()
    deployment = f"text;t={m}"
    result = azure.stream(turn(f"{name}/{deployment}", m))
    assert result.terminal["type"] == "done", result.text
    assert m in "".join(e.get("delta", "") for e in result.events if e["type"] == "text_delta")
    [seen] = azure_seen(azure.sim, deployment)
    assert seen["path"] == PATHS[name].format(deployment=deployment)
    dated = name.endswith("-dated")
    assert seen["apiVersion"] == (VERSION if dated else None)
    assert seen["auth"] == ("api-key" if dated else "bearer-key")  # the dated path's header; v1: the key as bearer
    rec = record(azure, result.headers["x-request-id"])
    assert (rec["provider"], rec["cloud"], rec["region"]) == (name, "azure", "eastus")
    assert rec["attempts"][0]["cloud"] == "azure"


@pytest.mark.parametrize("name", SERVED)
def test_catalog_model_ids_are_sent_as_their_deployment_names(azure, name):
    """`gpt-5` is deployed as `thinking` (a scenario that thinks), `gpt-4o` as `tools` (two parallel calls)."""
    thinking = azure.stream(turn(f"{name}/gpt-5", options={"throttleMs": 0, "reasoning": "high"}))
    assert thinking.terminal["type"] == "done", thinking.text
    kinds = [block["type"] for block in thinking.message["content"]]
    if name.startswith("az-resp"):  # Responses streams reasoning summaries; Azure's Chat Completions none
        assert kinds[0] == "thinking" and thinking.message["content"][0]["thinking"]
    assert thinking.message["model"] == "gpt-5"  # the catalog's id, not the deployment
    tools = azure.stream(turn(f"{name}/gpt-4o"))
    assert tools.terminal["type"] == "done", tools.text
    calls = [block for block in tools.message["content"] if block["type"] == "toolCall"]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"] and all(c["arguments"] for c in calls)
    assert tools.message["stopReason"] == "toolUse"


def test_a_key_azure_refuses_is_reported_with_azures_reason_and_request_id_never_the_key(azure):
    result = azure.stream(turn("az-bad/text"))
    assert result.terminal["type"] == "error"
    message = result.terminal["errorMessage"]
    assert message.startswith("az-bad/text returned HTTP 401: 401: Access denied due to invalid subscription key")
    assert "(Azure request id " in message
    assert BAD_KEY not in result.text and AZURE_KEY not in result.text
    rec = record(azure, result.headers["x-request-id"])
    assert len(rec["attempts"]) == 1  # a refused credential is not retried
    assert BAD_KEY not in json.dumps(rec)


@pytest.mark.parametrize("name", ["az-entra", "az-entra-dated"])
def test_entra_id_tokens_from_the_managed_identity_authenticate_both_paths(entra, name):
    m = marker()
    deployment = f"text;t={m}"
    result = entra.stream(turn(f"{name}/{deployment}", m))
    assert result.terminal["type"] == "done", result.text
    [seen] = azure_seen(entra.sim, deployment)
    assert seen["auth"] == "bearer-entra"
    assert "entra-sim-" not in result.text and "entra-sim-" not in json.dumps(
        record(entra, result.headers["x-request-id"])
    )


COUNT_ROUTES = {  # each door's count route, and how its answer names the model
    "messages": (
        "/v1/messages/count_tokens",
        lambda model, m: {"model": model, "messages": [{"role": "user", "content": m}]},
    ),
    "responses": ("/v1/responses/input_tokens", lambda model, m: {"model": model, "input": m}),
    "gemini": (
        "/v1beta/models/{model}:countTokens",
        lambda model, m: {"contents": [{"role": "user", "parts": [{"text": m}]}]},
    ),
}


@pytest.mark.parametrize("door", COUNT_ROUTES)
@pytest.mark.parametrize("name", ["az-resp", "az-chat-dated"])
def test_a_count_on_azure_is_a_400_saying_azure_has_no_counting_endpoint(azure, name, door):
    m = marker()
    route, body = COUNT_ROUTES[door]
    model = f"{name}/gpt-5"
    response = azure.http.post(route.format(model=model), json=body(model, m))
    assert response.status_code == 400, response.text
    assert f"{model}: Azure OpenAI has no input token counting endpoint" in response.text
    if door == "responses":  # the door whose error shape carries the gateway's kind
        assert response.json()["error"]["code"] == "tokens_not_counted"
    assert not azure.sim.seen(m), "Azure was not asked"
