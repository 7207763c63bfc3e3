"""Amazon Bedrock: Claude (`anthropic-messages`) through the `anthropic` SDK's Bedrock client (`claude.py`),
signed with credentials from the standard AWS chain (docs/clouds/bedrock.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.providers.clouds.base import CloudDescriptor, Demo
from app.providers.lazy import Adapter

# Taken out of the environment in demo mode: what the AWS chain would read before or beside the test keys.
DEMO_OTHER_SOURCES = (
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "ANTHROPIC_BEDROCK_BASE_URL",
)


def _demo_entries(simulator: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "providers": [
            {
                "name": "bedrock",
                "api": "anthropic-messages",
                "baseUrl": f"{simulator}/bedrock",
                "cloud": {"kind": "bedrock", "region": "us-east-1"},
            },
        ],
        "models": [
            {
                "provider": "bedrock",
                "id": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "reasoning": True,
                "contextWindow": 200000,
                "maxTokens": 64000,
                "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75},
            },
        ],
    }


def _demo_credentials(simulator: str, folder: Path) -> None:
    """The simulator's AWS test keys (it checks SigV4 signatures with them) as the AWS chain's first source; what
    would come before or beside them (a session token, a profile, a Bedrock API key) is taken out, so nothing of
    a real chain is signed for or sent to the simulator."""
    from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY

    for name in DEMO_OTHER_SOURCES:
        os.environ.pop(name, None)
    os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY_ID  # demo only: the AWS chain's first source
    os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_ACCESS_KEY


CLOUD = CloudDescriptor(
    name="bedrock",
    adapters={"anthropic-messages": Adapter("app.providers.clouds.bedrock.claude", "BedrockProvider")},
    auth=("aws",),
    required={"region": "us-east-1"},
    chain="the AWS credential chain",
    demo=Demo(entries=_demo_entries, credentials=_demo_credentials),
)
