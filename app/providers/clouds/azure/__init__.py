"""Azure OpenAI: the `openai-responses` and `openai-completions` adapters on an Azure OpenAI resource
(`adapters.py`), with the key in the entry's `keyEnv` (`auth: "api-key"`) or Microsoft Entra ID tokens
(`auth: "entra"`; docs/clouds/azure.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.providers.clouds.base import CloudDescriptor, Demo
from app.providers.lazy import Adapter

DEMO_KEY_ENV = "GATEWAY_DEMO_AZURE_OPENAI_KEY"  # the demo entry's `keyEnv`


def _demo_entries(simulator: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "providers": [
            {
                "name": "azure-openai",
                "api": "openai-responses",
                "baseUrl": f"{simulator}/azure",
                "keyEnv": DEMO_KEY_ENV,
                "cloud": {"kind": "azure", "region": "eastus", "deployments": {"gpt-5": "gpt-5-demo"}},
            },
        ],
        "models": [
            {"provider": "azure-openai", "id": "gpt-5", "reasoning": True, "cost": {"input": 1.25, "output": 10}},
        ],
    }


def _demo_credentials(simulator: str, folder: Path) -> None:
    """The simulator's Azure key, in the demo entry's `keyEnv`."""
    from simulator.azure import AZURE_KEY

    os.environ[DEMO_KEY_ENV] = AZURE_KEY


CLOUD = CloudDescriptor(
    name="azure",
    adapters={
        "openai-responses": Adapter("app.providers.clouds.azure.adapters", "AzureResponsesProvider"),
        "openai-completions": Adapter("app.providers.clouds.azure.adapters", "AzureCompletionsProvider"),
    },
    auth=("api-key", "entra"),
    required={},
    chain="Microsoft Entra ID (azure-identity)",
    endpoint="the resource endpoint",
    demo=Demo(entries=_demo_entries, credentials=_demo_credentials),
)
