"""The clouds' gateways for the tests of this folder: Azure OpenAI (key and Microsoft Entra ID), Google Vertex AI
and Amazon Bedrock, each a module-scoped gateway whose catalog places providers on the simulator's cloud wires
(`simulator/azure.py`, `simulator/vertex.py`, `simulator/bedrock.py`) with real credential chains."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from simulator.azure import AZURE_KEY
from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY
from simulator.vertex import service_account_info


def record(gateway, request_id: str) -> dict:
    gateway.job(request_id)
    response = gateway.http.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------------------------------- Azure OpenAI

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


# ------------------------------------------------------------------------------------------ Google Vertex AI

CLOUD = {"kind": "vertex", "project": "sim-project"}
KINDS = {"claude": "anthropic-messages", "gemini": "google-generative-ai"}
PUBLISHER = {"claude": "anthropic", "gemini": "google"}
REGION = {"claude": "us-east5", "gemini": "global"}


def providers(base: str) -> list[dict]:
    out = []
    for suffix in ("", "-expiry", "-bad"):
        for kind, api in KINDS.items():
            out.append(
                {"name": f"vx-{kind}{suffix}", "api": api, "baseUrl": base, "cloud": {**CLOUD, "region": REGION[kind]}}
            )
    return out


@pytest.fixture(scope="module")
def vertex(gateway_factory, sim, tmp_path_factory):
    folder = tmp_path_factory.mktemp("vertex")
    token_uri = f"{sim.url}/vertex/token"
    good, bad = folder / "sa.json", folder / "sa-unknown-key.json"
    good.write_text(json.dumps(service_account_info(token_uri)))
    bad.write_text(json.dumps(service_account_info(token_uri, registered=False)))
    path = folder / "catalog.json"
    path.write_text(json.dumps({"providers": providers(f"{sim.url}/vertex")}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(good))
        env.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
        gateway = gateway_factory(catalog=str(path))
        gateway.bad_credentials = bad
        yield gateway


def vertex_seen(sim, model: str) -> list[dict]:
    return [e for e in sim.http.get("/vertex/_sim/requests").json() if e["model"] == model]


# ------------------------------------------------------------------------------------------ Amazon Bedrock

SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"  # an inference profile id, as Bedrock names it
PRICE = {"input": 3.3, "output": 16.5, "cacheRead": 0.33, "cacheWrite": 4.125}
ONE_HOUR_WRITES = "text;cache_write=1000;cache_write_1h=600"  # of 1000 cache writes, 600 for an hour
CREDENTIAL_PROCESS = """\
import json, sys
from datetime import datetime, timedelta, timezone
creds = json.load(open(sys.argv[1]))
expires = datetime.now(timezone.utc) + timedelta(minutes=5)
print(json.dumps({"Version": 1, **creds, "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}))
"""
ROTATED_KEY_ID, ROTATED_SECRET, ROTATED_TOKEN = (
    "ASIASIMULATORROTATED2",
    "rotated-secret-not-a-real-key",
    "rotated-session-token",
)


class AwsChain:
    """The AWS config the gateway's chain reads, with the credentials its `credential_process` prints."""

    def __init__(self, root: Path) -> None:
        self.current = root / "current.json"
        (root / "process.py").write_text(CREDENTIAL_PROCESS)
        self.config = root / "config"
        self.config.write_text(
            f"[default]\ncredential_process = {sys.executable} {root / 'process.py'} {self.current}\n"
        )
        (root / "credentials").write_text("")
        self.use(TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY)

    def use(self, key_id: str, secret: str, token: str | None = None) -> None:
        creds = {"AccessKeyId": key_id, "SecretAccessKey": secret, **({"SessionToken": token} if token else {})}
        self.current.write_text(json.dumps(creds))


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("aws")
    aws = AwsChain(root)
    patch = pytest.MonkeyPatch()
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANTHROPIC_BEDROCK_BASE_URL",
    ):
        patch.delenv(name, raising=False)
    patch.setenv("AWS_CONFIG_FILE", str(aws.config))
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(root / "credentials"))
    patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield aws
    patch.undo()


@pytest.fixture(scope="module")
def bedrock(gateway_factory, sim, chain, tmp_path_factory):
    catalog = {
        "providers": [
            {"name": "bedrock", "api": "anthropic-messages", "cloud": {"kind": "bedrock", "region": "us-east-1"}}
        ],
        "models": [
            {"provider": "bedrock", "id": SONNET, "contextWindow": 200000, "maxTokens": 64000, "cost": PRICE},
            {
                "provider": "bedrock",
                "id": "thinking",
                "reasoning": True,
                "contextWindow": 200000,
                "maxTokens": 8192,
                "cost": PRICE,
            },
            {"provider": "bedrock", "id": ONE_HOUR_WRITES, "cost": PRICE},
        ],
    }
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(catalog))
    return gateway_factory(
        catalog=str(path), base_urls={"bedrock": f"{sim.url}/bedrock"}, retries=2, retry_after_cap_ms=20
    )


@pytest.fixture
def wire(sim):
    """The simulator's Bedrock routes: the credentials they accept (restored after the test)."""
    state = sim.server.app.state.bedrock
    keys, expired = dict(state.keys), set(state.expired)
    yield state
    state.keys, state.expired = keys, expired
