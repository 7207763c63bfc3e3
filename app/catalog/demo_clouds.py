"""Demo mode's cloud providers (`make run`): each cloud's demo entries (`CloudDescriptor.demo` in
`app/providers/clouds/`: an Amazon Bedrock Claude, a Vertex AI Claude, a Vertex AI Gemini and an Azure OpenAI
entry), served by the built-in simulator (`simulator/bedrock.py`, `simulator/vertex.py`, `simulator/azure.py`) with
test credentials made for this process only. Credentials still come from each cloud's standard chain, as outside
demo mode: each cloud puts its test credentials where its chain looks first, and takes out what would come before
or beside them, so nothing of a real chain is signed for or sent to the simulator. Never used outside demo mode
(`app.main.demo_settings`), where no vendor or cloud is called."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

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


def with_demo_clouds(settings: Settings, simulator: str) -> Settings:
    """`settings` with the demo's cloud providers added to its catalog (a file written for this process, the
    operator's `GATEWAY_CATALOG` entries first) and their test credentials in this process's environment."""
    folder = Path(tempfile.mkdtemp(prefix="gateway-demo-clouds-"))
    for cloud in CLOUDS.values():
        cloud.demo.credentials(simulator, folder)
    data: dict[str, Any] = json.loads(Path(settings.catalog).read_text()) if settings.catalog else {}
    demo = demo_cloud_catalog(simulator)
    named = {p.get("name") for p in data.get("providers", [])}
    data["providers"] = [*data.get("providers", []), *(p for p in demo["providers"] if p["name"] not in named)]
    data["models"] = [*data.get("models", []), *(m for m in demo["models"] if m["provider"] not in named)]
    catalog = folder / "catalog.json"
    catalog.write_text(json.dumps(data))
    return settings.model_copy(update={"catalog": str(catalog)})
