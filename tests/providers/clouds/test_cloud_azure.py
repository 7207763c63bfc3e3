"""Azure OpenAI (CONTRACT §9a, docs/clouds/azure.md): `openai-responses` and `openai-completions` on an Azure
resource through the official `openai` SDK inside the gateway, on the v1 path and the dated `api-version`
path, against the simulator's Azure (`simulator/azure.py`) over loopback HTTP."""

from __future__ import annotations

import json

import httpx
import pytest

from simulator.azure import AZURE_KEY
from tests.conftest import marker, turn

BAD_KEY = "azure-wrong-key-0000000000"
VERSION = "2025-04-01-preview"


def provider(name: str, api: str, key_env: str = "AZURE_SIM_TEST_KEY", **cloud: object) -> dict[str, object]:
    return {
        "name": name,
        "api": api,
        "baseUrl": "@SIMULATOR@/azure",
        "keyEnv": key_env,
        "cloud": {
            "kind": "azure",
            "region": "eastus",
            "deployments": {"gpt-5": "thinking", "gpt-4o": "tools"},
            **cloud,
        },
    }


PROVIDERS = {
    "az-resp": provider("az-resp", "openai-responses"),
    "az-resp-dated": provider("az-resp-dated", "openai-responses", apiVersion=VERSION),
    "az-chat": provider("az-chat", "openai-completions"),
    "az-chat-dated": provider("az-chat-dated", "openai-completions", apiVersion=VERSION),
    "az-bad": provider("az-bad", "openai-responses", key_env="AZURE_SIM_BAD_KEY", apiVersion=VERSION),
}
PATHS = {  # where each provider's turns must land on the resource
    "az-resp": "/azure/openai/v1/responses",
    "az-resp-dated": "/azure/openai/responses",
    "az-chat": "/azure/openai/v1/chat/completions",
    "az-chat-dated": "/azure/openai/deployments/{deployment}/chat/completions",
}
SERVED = list(PATHS)


@pytest.fixture(scope="module")
def azure(gateway_factory, sim, tmp_path_factory):
    path = tmp_path_factory.mktemp("azure") / "catalog.json"
    entries = [json.loads(json.dumps(p).replace("@SIMULATOR@", sim.url)) for p in PROVIDERS.values()]
    models = [
        {"provider": name, "id": "gpt-5", "reasoning": True, "cost": {"input": 1.25, "output": 10}}
        for name in PROVIDERS
    ]
    path.write_text(json.dumps({"providers": entries, "models": models}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AZURE_SIM_TEST_KEY", AZURE_KEY)
        env.setenv("AZURE_SIM_BAD_KEY", BAD_KEY)
        return gateway_factory(catalog=str(path))


def azure_seen(sim, deployment: str) -> list[dict]:
    return [e for e in sim.http.get("/azure/_sim/requests").json() if e["deployment"] == deployment]


def record(gateway, request_id: str) -> dict:
    gateway.job(request_id)
    response = gateway.http.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    return response.json()


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


@pytest.mark.parametrize("name", SERVED)
def test_a_429_with_retry_after_ms_is_retried_then_served(azure, name):
    m = marker()
    deployment = f"text;throttle=1;t={m}"
    result = azure.stream(turn(f"{name}/{deployment}", m))
    assert result.terminal["type"] == "done", result.text
    assert len(azure_seen(azure.sim, deployment)) == 2
    rec = record(azure, result.headers["x-request-id"])
    first, second = rec["attempts"]
    assert first["httpStatus"] == 429 and first["outcome"] == "error" and "Azure request id" in first["errorMessage"]
    assert second["outcome"] == "done" and second["cloud"] == "azure"


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


@pytest.mark.parametrize("name", SERVED)
def test_a_client_that_leaves_closes_the_azure_stream(azure, name):
    m = marker()
    body = turn(f"{name}/slow;n=200;delay_ms=20;t={m}", m)
    with httpx.Client(base_url=azure.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data:") and "text_delta" in line:
                    break
    entry = azure.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and entry["completed"] is False


# Microsoft Entra ID: `DefaultAzureCredential` (azure-identity, the real class) finds the managed identity the
# simulator plays (`simulator/entra.py`, the App Service protocol: IDENTITY_ENDPOINT + IDENTITY_HEADER).
ENTRA = {
    "az-entra": provider("az-entra", "openai-responses", key_env="AZURE_SIM_NO_KEY", auth="entra"),
    "az-entra-dated": provider(
        "az-entra-dated", "openai-completions", key_env="AZURE_SIM_NO_KEY", auth="entra", apiVersion=VERSION
    ),
    "az-entra-expiry": provider("az-entra-expiry", "openai-responses", key_env="AZURE_SIM_NO_KEY", auth="entra"),
}


@pytest.fixture(scope="module")
def entra(gateway_factory, sim, tmp_path_factory):
    from simulator.entra import IDENTITY_HEADER

    path = tmp_path_factory.mktemp("entra") / "catalog.json"
    entries = []
    for template in ENTRA.values():
        entry = json.loads(json.dumps(template).replace("@SIMULATOR@", sim.url))
        del entry["keyEnv"]  # credentials from Entra ID only
        entries.append(entry)
    path.write_text(json.dumps({"providers": entries}))
    with pytest.MonkeyPatch.context() as env:
        for name in (
            "AZURE_CLIENT_ID",
            "AZURE_TENANT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_FEDERATED_TOKEN_FILE",
            "MSI_ENDPOINT",
        ):
            env.delenv(name, raising=False)
        env.setenv("IDENTITY_ENDPOINT", f"{sim.url}/entra/msi/token")
        env.setenv("IDENTITY_HEADER", IDENTITY_HEADER)
        yield gateway_factory(catalog=str(path))


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


def test_an_expired_entra_token_is_renewed_for_the_next_turn_while_an_open_stream_goes_on(entra):
    """Tokens issued at their expiry: the second turn, sent while the first still streams, gets a new token
    (azure-identity renews it before the request) and the first stream, opened with the old one, ends done."""
    sim = entra.sim
    sim.http.post("/entra/_sim/lifetime", params={"seconds": 0})
    try:
        before = sim.http.get("/entra/_sim/issued").json()["issued"]
        first_marker, second_marker = marker(), marker()
        body = turn(f"az-entra-expiry/slow;n=40;delay_ms=10;t={first_marker}", first_marker)
        with httpx.Client(base_url=entra.url, timeout=30) as client:
            with client.stream("POST", "/v1/stream", json=body) as response:
                lines = response.iter_lines()
                next(line for line in lines if "text_delta" in line)  # the first stream is open and streaming
                second = entra.stream(turn(f"az-entra-expiry/text;t={second_marker}", second_marker))
                rest = list(lines)
        assert second.terminal["type"] == "done", second.text
        assert any('"type":"done"' in line.replace(" ", "") for line in rest)
        assert sim.http.get("/entra/_sim/issued").json()["issued"] - before == 2
        [first_seen], [second_seen] = sim.seen(first_marker), sim.seen(second_marker)
        assert first_seen["authSha256"] != second_seen["authSha256"]  # the second turn went with a new token
        assert first_seen["completed"] is True
    finally:
        sim.http.post("/entra/_sim/lifetime", params={"seconds": 3600})


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
