"""Adapters and vendor SDKs are imported when first needed (`app.providers.lazy`), not when the app is imported."""

from __future__ import annotations

import subprocess
import sys

from app.catalog import Catalog
from app.main import demo_settings
from app.providers.lazy import LazyProvider, load_adapters, warm_up
from app.providers.registry import build_providers
from app.settings import Settings

VENDOR_MODULES = ("anthropic", "openai", "google.genai", "botocore", "redis", "aiohttp", "httpx2")


def test_importing_the_app_and_building_a_gateway_imports_no_vendor_sdk() -> None:
    """The three built-in vendors served (outside demo mode: the demo's simulator imports botocore itself)."""
    script = (
        "import sys\n"
        "from app.gateway import Gateway\n"
        "from app.main import create_app\n"
        "from app.settings import Settings\n"
        "settings = Settings(anthropic_api_key='k', openai_api_key='k', gemini_api_key='k',\n"
        "                    database_url='sqlite:///:memory:')\n"
        "create_app(settings)\n"
        "assert len(Gateway(settings).dispatcher.providers) >= 3\n"
        f"print(','.join(m for m in {VENDOR_MODULES!r} if m in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert found.stdout.strip() == ""


async def test_a_lazy_provider_knows_its_place_at_once_and_builds_its_adapter_when_loaded() -> None:
    settings = demo_settings(Settings(port=8123))
    catalog = Catalog.load(settings.catalog)
    providers = build_providers(settings, catalog.providers, lazy=True)
    anthropic, bedrock = providers["anthropic"], providers["bedrock"]
    assert isinstance(anthropic, LazyProvider) and isinstance(bedrock, LazyProvider)
    assert (anthropic.name, anthropic.api, anthropic.placement) == ("anthropic", "anthropic-messages", None)
    assert bedrock.placement is not None and bedrock.placement.cloud == "bedrock"
    assert not anthropic.loaded
    try:
        await load_adapters([anthropic])
        assert anthropic.loaded and not bedrock.loaded
        assert type(anthropic.built).__name__ == "AnthropicProvider"
        assert anthropic.built.base_url == f"{settings.anthropic_base_url}/"  # type: ignore[attr-defined]
        await warm_up(providers.values())
        assert all(p.loaded for p in providers.values() if isinstance(p, LazyProvider))
    finally:
        for provider in providers.values():
            await provider.aclose()
