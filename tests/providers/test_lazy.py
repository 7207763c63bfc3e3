"""Adapters and vendor SDKs are imported when first needed (`app.providers.lazy`), not when the app is imported."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.catalog import Catalog
from app.main import demo_settings
from app.providers.lazy import Adapter, AdapterLoads, LazyProvider
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


def test_a_catalog_with_clouds_imports_no_cloud_sdk_before_a_turn_needs_it(tmp_path: Path) -> None:
    """Bedrock, Vertex (Claude and Gemini) and Azure entries in the catalog (the demo's, on an address nothing
    listens at), outside demo mode: building the app and the gateway imports neither a vendor SDK nor botocore,
    google-auth or azure-identity (issue 42: ≤ 1.5 s to the first turn with clouds configured)."""
    from app.catalog.demo_clouds import demo_cloud_catalog
    from app.providers.clouds.azure import DEMO_KEY_ENV

    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(demo_cloud_catalog("http://127.0.0.1:9")))
    cloud_modules = (*VENDOR_MODULES, "google.auth", "azure.identity")
    script = (
        "import sys\n"
        "from app.gateway import Gateway\n"
        "from app.main import create_app\n"
        "from app.settings import Settings\n"
        "settings = Settings(anthropic_api_key='k', openai_api_key='k', gemini_api_key='k',\n"
        f"                    database_url='sqlite:///:memory:', catalog={str(catalog)!r})\n"
        "create_app(settings)\n"
        "served = Gateway(settings).dispatcher.providers\n"
        "assert {'bedrock', 'vertex-claude', 'vertex-gemini', 'azure-openai'} <= set(served), sorted(served)\n"
        f"print(','.join(m for m in {cloud_modules!r} if m in sys.modules))\n"
    )
    env = {**os.environ, DEMO_KEY_ENV: "test-key"}
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120, env=env
    )
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
        await AdapterLoads().for_turn([anthropic])
        assert anthropic.loaded and not bedrock.loaded
        assert type(anthropic.built).__name__ == "AnthropicProvider"
        assert anthropic.built.base_url == f"{settings.anthropic_base_url}/"  # type: ignore[attr-defined]
        await AdapterLoads().warm_up(providers.values())
        assert all(p.loaded for p in providers.values() if isinstance(p, LazyProvider))
    finally:
        for provider in providers.values():
            await provider.aclose()


async def test_loading_an_adapter_never_takes_the_import_lock_on_the_event_loops_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Adapter.load` holds one process-wide lock while it imports, and another thread may hold it for seconds
    (the warm-up importing another vendor's SDK): a load that took it on the event loop's thread, even for a
    module already imported, would stall every turn meanwhile (a Bedrock turn's 0.5 s first-event timeout ran
    out before its request was sent, tests/providers/clouds/test_bedrock.py)."""
    threads: list[threading.Thread] = []
    real_load = Adapter.load

    def load(adapter: Adapter) -> object:
        threads.append(threading.current_thread())
        return real_load(adapter)

    monkeypatch.setattr(Adapter, "load", load)
    settings = demo_settings(Settings(port=8123))
    provider = build_providers(settings, Catalog.load(settings.catalog).providers, lazy=True)["anthropic"]
    assert isinstance(provider, LazyProvider)
    try:
        built = await provider.load()
        assert type(built).__name__ == "AnthropicProvider" and provider.loaded
        assert threads and threading.current_thread() not in threads
    finally:
        await provider.aclose()


_GATED_ADAPTER = """
import threading
import lazy_test_gates as gates

gates.imported.append(__name__)
gates.started[__name__].set()
gates.release[__name__].wait(30)


class Fake:
    def __init__(self, config):
        self.config = config

    async def aclose(self):
        pass
"""


async def test_a_turns_adapter_load_goes_before_the_warm_ups_next_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up is importing vendor A's adapter when a turn needs C's: once A's import ends (it cannot be stopped
    halfway), C's goes next and the warm-up's next one (B) only after it, not whichever thread takes the import
    lock first. Each fake adapter module's import waits until the test releases it."""
    names = ("lazy_test_a", "lazy_test_b", "lazy_test_c")
    (tmp_path / "lazy_test_gates.py").write_text(
        "import threading\n"
        "imported = []\n"
        f"started = {{name: threading.Event() for name in {names!r}}}\n"
        f"release = {{name: threading.Event() for name in {names!r}}}\n"
    )
    for name in names:
        (tmp_path / f"{name}.py").write_text(_GATED_ADAPTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("lazy_test_gates", *names):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import lazy_test_gates as gates  # type: ignore[import-not-found]

    called: list[str] = []  # LazyProvider.load, as the event loop calls it
    loaded = {name: asyncio.Event() for name in names}
    real_load = LazyProvider.load

    async def load(provider: LazyProvider) -> Any:
        called.append(provider.name)
        built = await real_load(provider)
        loaded[provider.name].set()
        return built

    monkeypatch.setattr(LazyProvider, "load", load)
    a, b, c = (
        LazyProvider(Adapter(name, "Fake"), "test", SimpleNamespace(name=name, placement=None)) for name in names
    )  # type: ignore[arg-type]
    loads = AdapterLoads()
    try:
        warming = asyncio.create_task(loads.warm_up([a, b]))
        await asyncio.to_thread(gates.started["lazy_test_a"].wait, 30)
        turn = asyncio.create_task(loads.for_turn([c]))
        await asyncio.to_thread(gates.started["lazy_test_c"].wait, 30)  # C's thread waits for the import lock
        gates.release["lazy_test_a"].set()
        await loaded["lazy_test_a"].wait()
        assert called == ["lazy_test_a", "lazy_test_c"]  # the warm-up did not start B's load meanwhile
        gates.release["lazy_test_c"].set()
        await turn
        assert c.loaded and not b.loaded
        gates.release["lazy_test_b"].set()
        await warming
        assert called == ["lazy_test_a", "lazy_test_c", "lazy_test_b"]
        assert gates.imported == ["lazy_test_a", "lazy_test_c", "lazy_test_b"]
    finally:
        for name in names:
            gates.release[name].set()
