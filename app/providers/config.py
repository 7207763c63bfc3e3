"""What one configured provider is built from: every adapter's constructor takes a `ProviderConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from app.contract.catalog_entries import Cloud
from app.providers.base import Placement

MAX_EVENT_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """The upstream clients' bounds (`app.providers.transport.client_options`), from the gateway's settings."""

    connect_timeout: float = 10.0
    total_timeout: float = 600.0
    max_connections: int = 10_000
    max_event_bytes: int = MAX_EVENT_BYTES  # one upstream SSE event (or line) at most; 0: unbounded


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
