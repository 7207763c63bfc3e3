"""Every catalog example in README.md and docs/ (a fenced `json` block of providers, models and routes) loads as
written and serves a key that has a budget: each route and model it names has a price (otherwise such a key gets
403 `model_not_priced`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.catalog import Catalog
from app.catalog.resolve import ModelResolver

ROOT = Path(__file__).resolve().parents[2]
CATALOG_KEYS = {"providers", "models", "routes"}


def catalog_examples() -> list[Any]:
    found = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in [page for page in pages if "agents" not in page.parts]:  # docs/agents: the agents' own configs
        for number, block in enumerate(re.findall(r"```json\n(.*?)```", page.read_text(), re.S)):
            try:
                data = json.loads(block)
            except ValueError:
                continue  # an excerpt with placeholders (…)
            if isinstance(data, dict) and data and set(data) <= CATALOG_KEYS:
                found.append(pytest.param(data, id=f"{page.relative_to(ROOT)}#{number}"))
    return found


@pytest.mark.parametrize("example", catalog_examples())
def test_a_documented_catalog_loads_and_prices_every_name_it_serves(example: dict[str, Any]) -> None:
    catalog = Catalog.load()
    catalog.add(example, "the example")
    resolver = ModelResolver(catalog, catalog.providers)
    names = [route["name"] for route in example.get("routes", [])]
    names += [f"{model['provider']}/{model['id']}" for model in example.get("models", [])]
    for name in names:
        unpriced = resolver.unpriced(name)
        assert unpriced is None, f"{name}: {unpriced.provider}/{unpriced.model.id} has no price"


def test_the_pools_example_is_among_them() -> None:
    assert any("pools.md" in param.id for param in catalog_examples())
