"""What one configured provider is built from: every adapter's constructor takes a `ProviderConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from app.contract.catalog_entries import Cloud
from app.providers.base import Placement
from app.providers.transport import TransportSettings


@dataclass(frozen=True, kw_only=True)
class ProviderConfig:
    """One provider as the registry configures it (`app.providers.registry.build_providers`). Never shows the key."""

    name: str  # the catalog provider's name (`anthropic`, `openai`, a local server's)
    api_key: str = field(default="", repr=False)  # "": none (a local server that needs no key)
    base_url: str | None = None  # None: the SDK's default
    transport: TransportSettings = field(default_factory=TransportSettings)
    compat: Mapping[str, Any] = field(default_factory=dict)  # the catalog entry's `compat` (Chat Completions only)
    cloud: Cloud | None = None  # the catalog entry's `cloud`: the api runs on Bedrock, Vertex AI or Azure OpenAI

    @property
    def placement(self) -> Placement | None:
        """The cloud and region the provider's api runs on (None at the api's maker): its adapter's `placement`."""
        return Placement(self.cloud.kind, self.cloud.region) if self.cloud is not None else None
