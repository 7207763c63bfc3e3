"""Demo mode's cloud providers (`make run`): each cloud's demo entries (`CloudDescriptor.demo` in
`app/providers/clouds/`: an Amazon Bedrock Claude, a Vertex AI Claude, a Vertex AI Gemini and an Azure OpenAI
entry), served by the built-in simulator (`simulator/bedrock.py`, `simulator/vertex.py`, `simulator/azure.py`) with
test credentials made for this process only. Credentials still come from each cloud's standard chain, as outside
demo mode: each cloud puts its test credentials where its chain looks first, and takes out what would come before
or beside them, so nothing of a real chain is signed for or sent to the simulator. Never used outside demo mode
(`app.main.demo_settings`), where no vendor or cloud is called."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Collection

from app.catalog import Catalog
from app.providers.clouds.registry import CLOUDS
from app.settings import Settings


def demo_cloud_catalog(simulator: str) -> dict[str, Any]:
    """The demo's cloud providers and models, on the simulator at `simulator` (in `CLOUDS` order)."""
    catalog: dict[str, list[dict[str, Any]]] = {"providers": [], "models": []}
    for cloud in CLOUDS.values():
        entries = cloud.demo.entries(simulator)
        catalog["providers"] += entries["providers"]
        catalog["models"] += entries["models"]
    return catalog


# Where the simulator serves each api (below its mount point): every catalog provider of the api is sent there.
SIMULATOR_PATHS = {
    "anthropic-messages": "/anthropic",
    "openai-responses": "/openai/v1",
    "google-generative-ai": "/google",
    "openai-completions": "/compat/v1",
}


def simulator_base_urls(catalog: Catalog, simulator: str) -> dict[str, str]:
    """Every catalog provider that runs at its api's maker (no `cloud`), the built-in ones and the operator's,
    → the simulator's endpoint for its api: in demo mode no key, base URL or catalog `baseUrl` sends a turn to
    a vendor."""
    return {
        name: simulator + SIMULATOR_PATHS[info.api]
        for name, info in catalog.providers.items()
        if info.cloud is None and info.api in SIMULATOR_PATHS
    }


def clouds_off_the_simulator(catalog: Catalog, simulator: str) -> list[str]:
    """The catalog's cloud providers that the simulator does not serve (the operator's, not the demo's own):
    demo mode refuses to start with them rather than call a real cloud."""
    return sorted(
        name
        for name, info in catalog.providers.items()
        if info.cloud is not None and not (info.base_url or "").startswith(simulator)
    )


# The built-in providers the simulator serves in demo mode; they and the demo's cloud providers list its scenarios
# as models.
SCENARIO_PROVIDERS = ("anthropic", "openai", "google", "compat")


def demo_cloud_providers() -> frozenset[str]:
    """The names of the demo's cloud providers: they answer only to `<provider>/<model id>`, so that a
    vendor's plain id (`gpt-5`) is not made ambiguous by the demo's Azure `gpt-5`."""
    return frozenset(p["name"] for p in demo_cloud_catalog("")["providers"])


def demo_serves(catalog: Catalog) -> Callable[[str, str], bool]:
    """Whether demo mode serves `<provider>/<model id>`: only an id the catalog lists (a scenario's parameters
    may follow it after `;`, `slow;n=64`) or a recorded sample (`replay-<name>`); any other id gets the
    unknown-model error, as a vendor would answer it, instead of a simulated reply. A provider the catalog
    lists no model of (a local server: its ids are its own) serves any id."""
    listing = {provider for provider, _ in catalog.models}

    def served(provider: str, model_id: str) -> bool:
        if provider not in listing or model_id.startswith("replay-"):
            return True
        return catalog.model(provider, model_id.partition(";")[0]) is not None

    return served


_FOLDERS: list[Path] = []  # made by `with_demo_clouds` in this process


def remove_demo_credentials(catalog: str | None = None) -> None:
    """Remove the folder `with_demo_clouds` made for the demo settings whose catalog is `catalog` (None: every
    one it made): each holds a freshly generated service-account private key (Vertex AI's test credentials).
    The lifespan calls it when the gateway stops (uvicorn ends a process it stopped on SIGTERM by raising the
    signal again, so `atexit` would not run then); `atexit` covers a start that failed."""
    for folder in list(_FOLDERS):
        if catalog is None or Path(catalog).parent == folder:
            _FOLDERS.remove(folder)
            shutil.rmtree(folder, ignore_errors=True)


atexit.register(remove_demo_credentials)


def with_demo_clouds(settings: Settings, simulator: str, scenarios: Collection[str] = ()) -> Settings:
    """`settings` with the demo's cloud providers added to its catalog (a file written for this process, the
    operator's `GATEWAY_CATALOG` entries first) and their test credentials in this process's environment;
    `scenarios` (the simulator's) listed as models of each of `SCENARIO_PROVIDERS` and of the cloud entries."""
    folder = Path(tempfile.mkdtemp(prefix="gateway-demo-clouds-"))
    for cloud in CLOUDS.values():
        cloud.demo.credentials(simulator, folder)
    data: dict[str, Any] = json.loads(Path(settings.catalog).read_text()) if settings.catalog else {}
    demo = demo_cloud_catalog(simulator)
    named = {p.get("name") for p in data.get("providers", [])}
    data["providers"] = [*data.get("providers", []), *(p for p in demo["providers"] if p["name"] not in named)]
    data["models"] = [*data.get("models", []), *(m for m in demo["models"] if m["provider"] not in named)]
    served = [*SCENARIO_PROVIDERS, *(p["name"] for p in demo["providers"])]
    scenario_models = [{"provider": p, "id": name} for p in served for name in scenarios]
    data["models"] = scenario_models + data["models"]  # a catalog entry of the same id comes later and wins
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps(data))
    _FOLDERS.append(folder)
    return settings.model_copy(update={"catalog": str(catalog)})
