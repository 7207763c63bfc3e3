"""The adapter class for an api run on a cloud, where the cloud needs its own (CONTRACT §9a). A cloud and api
not listed here use the api's own adapter, which reads `config.cloud` itself where it must."""

from __future__ import annotations

from typing import Callable

from app.catalog import Cloud
from app.providers.anthropic.bedrock import BedrockProvider
from app.providers.anthropic.vertex import VertexAnthropicProvider
from app.providers.azure import AzureCompletionsProvider, AzureResponsesProvider
from app.providers.google.vertex import VertexGoogleProvider
from app.providers.base import Provider
from app.providers.config import ProviderConfig

CLOUD_ADAPTERS: dict[tuple[str, str], Callable[[ProviderConfig], Provider]] = {
    ("bedrock", "anthropic-messages"): BedrockProvider,
    ("azure", "openai-responses"): AzureResponsesProvider,
    ("azure", "openai-completions"): AzureCompletionsProvider,
    ("vertex", "anthropic-messages"): VertexAnthropicProvider,
    ("vertex", "google-generative-ai"): VertexGoogleProvider,
}


def cloud_adapter(api: str, cloud: Cloud | None) -> Callable[[ProviderConfig], Provider] | None:
    """The adapter class for `api` on `cloud`, None for the api's own."""
    return CLOUD_ADAPTERS.get((cloud.kind, api)) if cloud is not None else None
