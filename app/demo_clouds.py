"""Demo mode's cloud providers (`make run`): a Vertex AI Claude, a Vertex AI Gemini and an Azure OpenAI entry,
served by the built-in simulator (`simulator/vertex.py`, `simulator/azure.py`) with test credentials made for
this process only — a fresh service-account key whose token endpoint is the simulator's, and the simulator's
Azure key. Never used outside demo mode (`app.main.demo_settings`), where no vendor or cloud is called."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from app.settings import Settings

AZURE_KEY_ENV = "GATEWAY_DEMO_AZURE_OPENAI_KEY"


def demo_cloud_catalog(simulator: str) -> dict[str, Any]:
    """The demo's cloud providers and models, on the simulator at `simulator`."""
    return {
        "providers": [
            {"name": "vertex-claude", "api": "anthropic-messages", "baseUrl": f"{simulator}/vertex",
             "cloud": {"kind": "vertex", "project": "demo-project", "region": "us-east5"}},
            {"name": "vertex-gemini", "api": "google-generative-ai", "baseUrl": f"{simulator}/vertex",
             "cloud": {"kind": "vertex", "project": "demo-project", "region": "global"}},
            {"name": "azure-openai", "api": "openai-responses", "baseUrl": f"{simulator}/azure", "keyEnv": AZURE_KEY_ENV,
             "cloud": {"kind": "azure", "region": "eastus", "deployments": {"gpt-5": "gpt-5-demo"}}},
        ],
        "models": [
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
    from simulator.vertex import service_account_info

    folder = Path(tempfile.mkdtemp(prefix="gateway-demo-clouds-"))
    account = folder / "vertex-service-account.json"
    account.write_text(json.dumps(service_account_info(f"{simulator}/vertex/token", project="demo-project")))
    account.chmod(0o600)
    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(account)  # demo only: Google's chain reads this file
    os.environ[AZURE_KEY_ENV] = AZURE_KEY
    data: dict[str, Any] = json.loads(Path(settings.catalog).read_text()) if settings.catalog else {}
    demo = demo_cloud_catalog(simulator)
    named = {p.get("name") for p in data.get("providers", [])}
    data["providers"] = [*data.get("providers", []), *(p for p in demo["providers"] if p["name"] not in named)]
    data["models"] = [*data.get("models", []), *(m for m in demo["models"] if m["provider"] not in named)]
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps(data))
    return settings.model_copy(update={"catalog": str(catalog)})
