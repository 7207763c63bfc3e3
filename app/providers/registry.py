"""Which adapter serves which api, and the providers this gateway has keys for."""

from __future__ import annotations

import logging
import os
from typing import Callable

from app.catalog import Catalog
from app.providers.anthropic import AnthropicProvider
from app.providers.base import Provider
from app.providers.google import GoogleProvider
from app.providers.openai import OpenAIResponsesProvider
from app.providers.openai_completions import OpenAICompletionsProvider
from app.providers.transport import TransportSettings
from app.settings import Settings

log = logging.getLogger("gateway.providers")

ADAPTERS: dict[str, Callable[..., Provider]] = {
    AnthropicProvider.api: AnthropicProvider,
    OpenAIResponsesProvider.api: OpenAIResponsesProvider,
    GoogleProvider.api: GoogleProvider,
    OpenAICompletionsProvider.api: OpenAICompletionsProvider,
}


def build_providers(settings: Settings, catalog: Catalog) -> dict[str, Provider]:
    """One SDK client per configured provider. A provider without a key is left out (requests get 404); one
    whose catalog entry names no key variable (a local server) is active once its base URL is configured
    (`GATEWAY_<NAME>_BASE_URL`)."""
    transport = TransportSettings(connect_timeout=settings.connect_timeout, total_timeout=settings.total_timeout)
    providers: dict[str, Provider] = {}
    for info in catalog.providers.values():
        adapter = ADAPTERS.get(info.api)
        if adapter is None:
            log.warning("provider %s: api %s has no adapter here", info.name, info.api)
            continue
        key = settings.provider_key(info.name) or next(
            (os.environ[name] for name in info.key_env if os.environ.get(name)), None
        )
        base_url = settings.provider_base_url(info.name) or info.base_url
        if not key and (info.key_env or not settings.provider_base_url(info.name)):
            continue
        providers[info.name] = adapter(info.name, key or "", base_url, transport, compat=info.compat)
    return providers
