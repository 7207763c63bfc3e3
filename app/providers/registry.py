"""Which adapter serves which api (on a cloud: the one its `CloudDescriptor` builds), and the providers this gateway
has keys for."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Mapping

from app.contract.catalog_entries import Cloud, ProviderInfo
from app.providers.base import Provider
from app.providers.clouds.registry import CLOUDS
from app.providers.config import ProviderConfig
from app.providers.lazy import Adapter, LazyProvider
from app.providers.config import TransportSettings
from app.redaction import register_secrets
from app.settings import Settings, base_url_variable

log = logging.getLogger("gateway.providers")

# Each api -> its adapter at the api's maker, named rather than imported (`app.providers.lazy`): an adapter's module
# imports its vendor's SDK. Each key is its adapter's `api` (tests/providers/test_provider_config.py checks).
ADAPTERS: dict[str, Adapter] = {
    "anthropic-messages": Adapter("app.providers.anthropic", "AnthropicProvider"),
    "openai-responses": Adapter("app.providers.openai_responses", "OpenAIResponsesProvider"),
    "google-generative-ai": Adapter("app.providers.google", "GoogleProvider"),
    "openai-completions": Adapter("app.providers.openai_completions", "OpenAICompletionsProvider"),
}


# The environment variables behind `Settings.provider_key` for the built-in providers.
BUILTIN_KEY_ENV: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
DEMO = "demo mode"  # the source of what demo mode filled in (`app.main.demo_settings`)


@dataclass(frozen=True)
class ProviderSetup:
    """Where a catalog provider's key and base URL come from, and whether it is served. Never shows the key."""

    name: str
    api: str
    key: str | None = field(repr=False)
    key_from: str | None  # the variable that held the key, `demo mode`, `settings`; None: no key
    base_url: str | None
    base_url_from: str  # `GATEWAY_<NAME>_BASE_URL`, `GATEWAY_BASE_URLS`, `demo mode`, `catalog`, `SDK default`
    served: bool
    missing: str | None  # what to set to serve it, when not served
    cloud: Cloud | None = None  # the cloud its api runs on (catalog `cloud`), None at the api's maker


def provider_setups(settings: Settings, providers: Mapping[str, ProviderInfo]) -> list[ProviderSetup]:
    """Every catalog provider with an adapter. A provider without a key is not served (requests get 404); one
    whose catalog entry names no key variable (a local server) is served once it has a base URL: its catalog
    entry's `baseUrl`, or `GATEWAY_<NAME>_BASE_URL`. A cloud provider (`cloud`) whose credentials come from
    its cloud's standard chain (no `keyEnv`) is served: the chain is read when its client is built and
    refreshed by the cloud's SDK, and a chain that yields nothing fails its requests with the cloud's reason. A
    provider on a cloud without a default URL (`CloudDescriptor.endpoint`: Azure OpenAI's resource endpoint) also
    needs its base URL."""
    setups = []
    for info in providers.values():
        if info.api not in ADAPTERS:
            log.warning("provider %s: api %s has no adapter here", info.name, info.api)
            continue
        key, key_from = _key(settings, info)
        configured_url, url_from = _base_url(settings, info.name)
        if info.key_env or key:
            served = bool(key)
            missing = None if served else "set " + " or ".join(info.key_env)
        elif info.cloud is not None:  # credentials from the cloud's chain
            served, missing = True, None
        else:  # keyless: a local server
            served = configured_url is not None or info.base_url is not None
            missing = None if served else f"set {base_url_variable(info.name)}"
        endpoint = CLOUDS[info.cloud.kind].endpoint if info.cloud is not None else None
        if served and endpoint is not None and not (configured_url or info.base_url):  # the cloud has no default URL
            served, missing = False, f"set its catalog baseUrl ({endpoint}) or {base_url_variable(info.name)}"
        base_url = configured_url or info.base_url
        if configured_url is None:
            url_from = "catalog" if info.base_url else "SDK default"
        setups.append(
            ProviderSetup(info.name, info.api, key, key_from, base_url, url_from, served, missing, info.cloud)
        )
    return setups


def _key(settings: Settings, info: ProviderInfo) -> tuple[str | None, str | None]:
    key = settings.provider_key(info.name)
    if key:
        env = next((name for name in BUILTIN_KEY_ENV.get(info.name, ()) if os.environ.get(name) == key), None)
        return key, env or (DEMO if settings.demo else "settings")
    for name in info.key_env:
        if os.environ.get(name):
            return os.environ[name], name
    return None, None


def _base_url(settings: Settings, name: str) -> tuple[str | None, str]:
    """The configured base URL (None: none configured) and where it came from."""
    url = settings.provider_base_url(name)
    if url is None:
        return None, ""
    simulator = settings.simulator_url()
    if simulator is not None and url.startswith(simulator):
        return url, DEMO
    env = base_url_variable(name)
    if os.environ.get(env) == url:
        return url, env
    return url, "GATEWAY_BASE_URLS" if settings.base_urls.get(name) == url else env


def build_providers(
    settings: Settings, catalog_providers: Mapping[str, ProviderInfo], *, lazy: bool = False
) -> dict[str, Provider]:
    """One SDK client per served provider (`provider_setups`). Each one's key is registered as a secret
    (`app.redaction`): a catalog provider's key (`keyEnv`) is redacted like the built-in ones'. `lazy` (the
    gateway's): each is a `LazyProvider`, its adapter and SDK imported when first needed."""
    transport = TransportSettings(
        connect_timeout=settings.connect_timeout,
        total_timeout=settings.total_timeout,
        max_event_bytes=settings.max_upstream_event_bytes,
    )
    providers: dict[str, Provider] = {}
    for setup in provider_setups(settings, catalog_providers):
        if setup.served:
            register_secrets(setup.key)
            info = catalog_providers[setup.name]
            config = ProviderConfig(
                name=setup.name,
                api_key=setup.key or "",
                base_url=setup.base_url,
                transport=transport,
                compat=info.compat,
                cloud=info.cloud,
            )
            adapter = CLOUDS[info.cloud.kind].adapters[setup.api] if info.cloud is not None else ADAPTERS[setup.api]
            providers[setup.name] = LazyProvider(adapter, setup.api, config) if lazy else adapter(config)
    return providers
