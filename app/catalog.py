"""Providers and models the gateway serves, with prices (USD per million tokens) and limits.

The built-in catalog is `catalog.json` beside this file; `GATEWAY_CATALOG` names a file of the same shape
whose providers and models are added (a model listed again replaces the built-in entry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN = Path(__file__).with_name("catalog.json")


@dataclass(frozen=True, slots=True)
class Pricing:
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    api: str
    key_env: tuple[str, ...] = ()
    base_url: str | None = None
    compat: dict[str, Any] = field(default_factory=dict)  # per-vendor wire differences (api `openai-completions`)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    provider: str
    id: str
    pricing: Pricing
    context_window: int | None = None
    max_tokens: int | None = None
    reasoning: bool = False
    aliases: tuple[str, ...] = ()

    def public(self) -> dict[str, Any]:
        p = self.pricing
        return {
            "provider": self.provider,
            "id": self.id,
            "reasoning": self.reasoning,
            "contextWindow": self.context_window,
            "maxTokens": self.max_tokens,
            "cost": {"input": p.input, "output": p.output, "cacheRead": p.cache_read, "cacheWrite": p.cache_write},
            "aliases": list(self.aliases),
        }


@dataclass
class Catalog:
    providers: dict[str, ProviderInfo] = field(default_factory=dict)
    models: dict[tuple[str, str], ModelInfo] = field(default_factory=dict)

    @classmethod
    def load(cls, extra: str | Path | None = None) -> "Catalog":
        catalog = cls()
        catalog.add(json.loads(BUILTIN.read_text()))
        if extra:
            catalog.add(json.loads(Path(extra).read_text()))
        return catalog

    def add(self, data: dict[str, Any]) -> None:
        for p in data.get("providers", []):
            key_env = p.get("keyEnv", [])
            self.providers[p["name"]] = ProviderInfo(
                name=p["name"],
                api=p["api"],
                key_env=tuple([key_env] if isinstance(key_env, str) else key_env),
                base_url=p.get("baseUrl"),
                compat=dict(p.get("compat") or {}),
            )
        for m in data.get("models", []):
            cost = m.get("cost", {})
            info = ModelInfo(
                provider=m["provider"],
                id=m["id"],
                pricing=Pricing(
                    input=float(cost.get("input", 0)),
                    output=float(cost.get("output", 0)),
                    cache_read=float(cost.get("cacheRead", 0)),
                    cache_write=float(cost.get("cacheWrite", 0)),
                ),
                context_window=m.get("contextWindow"),
                max_tokens=m.get("maxTokens"),
                reasoning=bool(m.get("reasoning", False)),
                aliases=tuple(m.get("aliases", [])),
            )
            self.models[(info.provider, info.id)] = info
            for alias in info.aliases:
                self.models[(info.provider, alias)] = info

    def model(self, provider: str, model_id: str) -> ModelInfo | None:
        return self.models.get((provider, model_id))

    def listed(self) -> list[ModelInfo]:
        seen: dict[int, ModelInfo] = {}
        for info in self.models.values():
            seen.setdefault(id(info), info)
        return list(seen.values())
