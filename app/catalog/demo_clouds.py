"""Demo mode's cloud providers (`make run`): an Amazon Bedrock Claude, a Vertex AI Claude, a Vertex AI Gemini and
an Azure OpenAI entry, served by the built-in simulator (`simulator/bedrock.py`, `simulator/vertex.py`,
`simulator/azure.py`) with test credentials made for this process only — the simulator's AWS test keys (which
it checks SigV4 signatures with), a fresh service-account key whose token endpoint is the simulator's, and the
simulator's Azure key. Credentials still come from each cloud's standard chain, as outside demo mode: they are
put where the chain looks first, and what would come before or beside them in the AWS chain (a session token,
a profile, a Bedrock API key) is taken out, so nothing of a real chain is signed for or sent to the simulator.
Never used outside demo mode (`app.main.demo_settings`), where no vendor or cloud is called."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from app.settings import Settings

AZURE_KEY_ENV = "GATEWAY_DEMO_AZURE_OPENAI_KEY"
# Taken out of the environment in demo mode: what the AWS chain would read before or beside the test keys.
AWS_OTHER_SOURCES = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL")


def demo_cloud_catalog(simulator: str) -> dict[str, Any]:
    """The demo's cloud providers and models, on the simulator at `simulator`."""
    return {
        "providers": [
            {"name": "bedrock", "api": "anthropic-messages", "baseUrl": f"{simulator}/bedrock",
             "cloud": {"kind": "bedrock", "region": "us-east-1"}},
            {"name": "vertex-claude", "api": "anthropic-messages", "baseUrl": f"{simulator}/vertex",
             "cloud": {"kind": "vertex", "project": "demo-project", "region": "us-east5"}},
            {"name": "vertex-gemini", "api": "google-generative-ai", "baseUrl": f"{simulator}/vertex",
             "cloud": {"kind": "vertex", "project": "demo-project", "region": "global"}},
            {"name": "azure-openai", "api": "openai-responses", "baseUrl": f"{simulator}/azure", "keyEnv": AZURE_KEY_ENV,
             "cloud": {"kind": "azure", "region": "eastus", "deployments": {"gpt-5": "gpt-5-demo"}}},
        ],
        "models": [
            {"provider": "bedrock", "id": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "reasoning": True,
             "contextWindow": 200000, "maxTokens": 64000, "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}},
            {"provider": "vertex-claude", "id": "claude-sonnet-4-5@20250929", "reasoning": True,
             "cost": {"input": 3.3, "output": 16.5, "cacheRead": 0.33, "cacheWrite": 4.125}},
            {"provider": "vertex-gemini", "id": "gemini-2.5-pro", "reasoning": True, "cost": {"input": 1.25, "output": 10}},
            {"provider": "azure-openai", "id": "gpt-5", "reasoning": True, "cost": {"input": 1.25, "output": 10}},
        ],
    }


def with_demo_clouds(settings: Settings, simulator: str) -> Settings:
    """`settings` with the demo's cloud providers added to its catalog (a file written for this process, the
    operator's `GATEWAY_CATALOG` entries first) and their test credentials in this process's environment."""
    from simulator.azure import AZURE_KEY
    from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY
    from simulator.vertex import service_account_info

    folder = Path(tempfile.mkdtemp(prefix="gateway-demo-clouds-"))
    account = folder / "vertex-service-account.json"
    account.write_text(json.dumps(service_account_info(f"{simulator}/vertex/token", project="demo-project")))
    account.chmod(0o600)
    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(account)  # demo only: Google's chain reads this file
    os.environ[AZURE_KEY_ENV] = AZURE_KEY
    for name in AWS_OTHER_SOURCES:
        os.environ.pop(name, None)
    os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY_ID  # demo only: the AWS chain's first source
    os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_ACCESS_KEY
    data: dict[str, Any] = json.loads(Path(settings.catalog).read_text()) if settings.catalog else {}
    demo = demo_cloud_catalog(simulator)
    named = {p.get("name") for p in data.get("providers", [])}
    data["providers"] = [*data.get("providers", []), *(p for p in demo["providers"] if p["name"] not in named)]
    data["models"] = [*data.get("models", []), *(m for m in demo["models"] if m["provider"] not in named)]
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps(data))
    return settings.model_copy(update={"catalog": str(catalog)})
