"""Demo mode's Amazon Bedrock entry (`make run`): a catalog provider `bedrock` running `anthropic-messages` on
Bedrock, served by the simulator mounted on this server (`simulator/bedrock.py`), which checks each request's
SigV4 signature.

Credentials still come from the AWS chain, as outside demo mode: demo mode puts the simulator's test credentials
in this process's environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, the chain's first source) and takes
out what would come before or beside them (a session token, a profile, a Bedrock API key), so nothing of a real
AWS chain is ever signed for or sent to the simulator. Only demo mode calls this.
"""

from __future__ import annotations

import os

from app.catalog import Catalog

PROVIDER = "bedrock"
# The demo's prices (USD per million tokens: Anthropic's list prices for Claude Sonnet 4.5); a deployment's own
# catalog says what its Bedrock contract charges.
SONNET_PRICE = {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}


def add_demo_bedrock(catalog: Catalog, simulator_url: str) -> None:
    """Add the `bedrock` provider (region us-east-1, base URL the simulator's Bedrock runtime) and its models,
    and use the simulator's test credentials."""
    from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY  # demo mode only

    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL"):
        os.environ.pop(name, None)
    os.environ["AWS_ACCESS_KEY_ID"] = TEST_ACCESS_KEY_ID
    os.environ["AWS_SECRET_ACCESS_KEY"] = TEST_SECRET_ACCESS_KEY
    catalog.add({
        "providers": [{"name": PROVIDER, "api": "anthropic-messages", "baseUrl": f"{simulator_url}/bedrock",
                       "cloud": {"kind": "bedrock", "region": "us-east-1"}}],
        "models": [
            {"provider": PROVIDER, "id": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "reasoning": True,
             "contextWindow": 200000, "maxTokens": 64000, "cost": SONNET_PRICE},
        ],
    }, "demo mode")
