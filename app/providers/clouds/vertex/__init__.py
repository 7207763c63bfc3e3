"""Google Vertex AI: Claude (`anthropic-messages`, `claude.py`) through the `anthropic` SDK's
`AsyncAnthropicVertex` and Gemini (`google-generative-ai`, `gemini.py`) through `google-genai` with
`vertexai=True`, both with Application Default Credentials (`auth.py`; docs/clouds/vertex.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from app.providers.clouds.base import CloudDescriptor, Demo
from app.providers.lazy import Adapter

DEMO_PROJECT = "demo-project"


def _demo_entries(simulator: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "providers": [
            {
                "name": "vertex-claude",
                "api": "anthropic-messages",
                "baseUrl": f"{simulator}/vertex",
                "cloud": {"kind": "vertex", "project": DEMO_PROJECT, "region": "us-east5"},
            },
            {
                "name": "vertex-gemini",
                "api": "google-generative-ai",
                "baseUrl": f"{simulator}/vertex",
                "cloud": {"kind": "vertex", "project": DEMO_PROJECT, "region": "global"},
            },
        ],
        "models": [
            {
                "provider": "vertex-claude",
                "id": "claude-sonnet-4-5@20250929",
                "reasoning": True,
                "cost": {"input": 3.3, "output": 16.5, "cacheRead": 0.33, "cacheWrite": 4.125},
            },
            {
                "provider": "vertex-gemini",
                "id": "gemini-2.5-pro",
                "reasoning": True,
                "cost": {"input": 1.25, "output": 10},
            },
        ],
    }


def _demo_credentials(simulator: str, folder: Path) -> None:
    """A fresh service-account key whose `token_uri` is the simulator's token endpoint, named by
    `GOOGLE_APPLICATION_CREDENTIALS` (where Application Default Credentials look first)."""
    from simulator.vertex import service_account_info

    account = folder / "vertex-service-account.json"
    account.write_text(json.dumps(service_account_info(f"{simulator}/vertex/token", project=DEMO_PROJECT)))
    account.chmod(0o600)
    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(account)  # demo only: Google's chain reads this file


CLOUD = CloudDescriptor(
    name="vertex",
    adapters={
        "anthropic-messages": Adapter("app.providers.clouds.vertex.claude", "VertexAnthropicProvider"),
        "google-generative-ai": Adapter("app.providers.clouds.vertex.gemini", "VertexGoogleProvider"),
    },
    auth=("google",),
    required={},
    chain="Google Application Default Credentials",
    demo=Demo(entries=_demo_entries, credentials=_demo_credentials),
)
