"""Providers, models and routes the gateway serves, with prices (USD per million tokens) and limits.

The built-in catalog is `catalog.json` beside this file; `GATEWAY_CATALOG` names a file of the same shape
whose providers, models and routes are added (an entry listed again replaces the built-in one).

A file has up to three lists:
- `providers`: `{name, api, baseUrl?, keyEnv?, compat?, cloud?, hostedTools?}`; `cloud` runs the api on a cloud
  (`{kind: "bedrock" | "vertex" | "azure", region?, project?, apiVersion?, auth?, deployments?}`, see `Cloud`;
  the clouds are `app.providers.clouds.registry.CLOUDS`);
- `models`: `{provider, id, reasoning?, contextWindow?, maxTokens?, cost? {input, output, cacheRead,
  cacheWrite, cacheWrite1h?}, aliases?, hostedTools?}` (`cacheWrite1h`: a 1-hour cache write, by default
  2 × input: `Pricing.one_hour_write`); `hostedTools` (`{webSearch: true | {maxUses}}`, see `HostedTools`) lets
  the vendor's own hosted tools serve a client's (off unless given; a model's replaces its provider's);
- `routes`: `{name, model | pool, fallback?, description?, dropParams?}` — a name clients may use as their model; `model` and
  each `fallback` entry are `"<provider>/<model id>"` (a fallback may also name another route, a pool's
  included); `pool` serves the route from a pool of deployments (`{strategy?, deployments: [{provider, model,
  name?, weight?, rpm?, tpm?, cost?}]}`, see `Pool` and docs/pools.md).
A key the gateway does not know, an `api` no adapter speaks, a route naming an unknown provider or a model of an unknown provider fails
at start-up with a `CatalogError` that names the file and the entry, so a typo never silently changes what
serves a request.

Beside the catalog in this package: `resolve.py` turns a requested model name into the attempt plan, and
`demo_clouds.py` adds the demo's cloud entries (served by the simulator).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Collection

from app.contract.catalog_entries import (
    CatalogRoute,
    Cloud,
    Deployment,
    HostedTools,
    ModelInfo,
    Pool,
    Pricing,
    ProviderInfo,
)
from app.providers.clouds.registry import CLOUDS

BUILTIN = Path(__file__).with_name("catalog.json")
ROUTE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")  # no `/`: never mistaken for `<provider>/<model>`
_KEYS = {
    "file": {"providers", "models", "routes"},
    "provider": {"name", "api", "baseUrl", "keyEnv", "compat", "cloud", "hostedTools"},
    "cloud": {"kind", "region", "project", "apiVersion", "auth", "deployments"},
    "model": {"provider", "id", "reasoning", "contextWindow", "maxTokens", "cost", "aliases", "hostedTools"},
    "hostedTools": {"webSearch"},
    "webSearch": {"maxUses"},
    "cost": {"input", "output", "cacheRead", "cacheWrite", "cacheWrite1h"},
    "route": {"name", "model", "pool", "fallback", "description", "dropParams"},
    "pool": {
        "strategy",
        "deployments",
        "waitMs",
        "tolerancePercent",
        "toleranceMs",
        "failuresToCool",
        "failureWindowMs",
        "healthCheck",
    },
    "healthCheck": {"intervalMs"},
    "deployment": {"provider", "model", "name", "weight", "rpm", "tpm", "maxInFlight", "firstEventTimeoutMs", "cost"},
}
POOL_STRATEGIES = ("weighted", "least-in-flight", "lowest-latency", "cost")


class CatalogError(ValueError):
    """A catalog file the gateway cannot serve from (raised at start-up)."""


def _check_keys(kind: str, entry: Any, where: str) -> None:
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: expected an object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - _KEYS[kind])
    if unknown:
        known = ", ".join(sorted(_KEYS[kind]))
        raise CatalogError(f"{where}: unknown key {', '.join(map(repr, unknown))} (known: {known})")


def _check_api(api: Any, where: str) -> None:
    """A provider's `api` must name an adapter (`app.providers.registry.ADAPTERS`): a typo would otherwise leave
    the provider unserved and its requests with a 404 that blames its key."""
    import difflib

    from app.providers.registry import ADAPTERS

    if api in ADAPTERS:
        return
    closest = difflib.get_close_matches(str(api), list(ADAPTERS), n=1)
    hint = f"did you mean {closest[0]!r}? " if closest else ""
    raise CatalogError(f"{where}: api {api!r} has no adapter ({hint}known: {', '.join(sorted(ADAPTERS))})")


def _cloud(entry: Any, api: str, where: str) -> Cloud:
    """A provider's `cloud`, checked against its cloud's descriptor."""
    _check_keys("cloud", entry, f"{where}: cloud")
    kind = entry.get("kind")
    cloud = CLOUDS.get(kind)
    if cloud is None:
        raise CatalogError(f"{where}: cloud kind {kind!r} must be one of {', '.join(sorted(CLOUDS))}")
    if api not in cloud.apis:
        raise CatalogError(f"{where}: api {api!r} does not run on {kind} (it runs {', '.join(sorted(cloud.apis))})")
    auth = entry.get("auth") or cloud.auth[0]
    if auth not in cloud.auth:
        raise CatalogError(f"{where}: cloud auth {auth!r} must be one of {', '.join(cloud.auth)}")
    for name, example in cloud.required.items():
        if not entry.get(name):
            raise CatalogError(f"{where}: a {kind} provider needs cloud.{name} (e.g. {example})")
    deployments = entry.get("deployments") or {}
    if not isinstance(deployments, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in deployments.items()
    ):
        raise CatalogError(f"{where}: cloud.deployments must map model ids to deployment names")
    return Cloud(
        kind=kind,
        region=entry.get("region"),
        project=entry.get("project"),
        api_version=entry.get("apiVersion"),
        auth=auth,
        deployments=dict(deployments),
    )


def _hosted_tools(entry: Any, where: str) -> HostedTools:
    """`hostedTools`, checked whole: a bad value names its entry."""
    _check_keys("hostedTools", entry, f"{where}: hostedTools")
    web = entry.get("webSearch", False)
    if isinstance(web, bool):
        return HostedTools(web_search=web)
    _check_keys("webSearch", web, f"{where}: hostedTools.webSearch")
    uses = web.get("maxUses")
    if uses is not None:
        uses = _positive(uses, "hostedTools.webSearch.maxUses", where, integer=True)
    return HostedTools(web_search=True, web_search_max_uses=uses)


@dataclass
class Catalog:
    providers: dict[str, ProviderInfo] = field(default_factory=dict)
    models: dict[tuple[str, str], ModelInfo] = field(default_factory=dict)
    routes: dict[str, CatalogRoute] = field(default_factory=dict)
    loaded_at: int = field(default_factory=lambda: int(time.time()))  # `created` of /v1/models entries

    @classmethod
    def load(cls, extra: str | Path | None = None) -> "Catalog":
        """The built-in catalog plus `extra`; raises CatalogError for a file that cannot be served from."""
        catalog = cls()
        catalog.add(json.loads(BUILTIN.read_text()), str(BUILTIN))
        if extra:
            try:
                data = json.loads(Path(extra).read_text())
            except (OSError, ValueError) as exc:
                raise CatalogError(f"catalog {extra}: cannot read it as JSON: {exc}") from None
            catalog.add(data, str(extra))
        return catalog

    def add(self, data: dict[str, Any], source: str = "catalog") -> None:
        """Add a catalog file's entries; raises CatalogError for unknown keys or missing fields."""
        _check_keys("file", data, f"catalog {source}")
        try:
            self._add(data, source)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CatalogError):
                raise
            raise CatalogError(f"catalog {source}: bad entry ({type(exc).__name__}: {exc})") from None
        self.validate(source)

    def _add(self, data: dict[str, Any], source: str) -> None:
        for index, p in enumerate(data.get("providers", [])):
            where = f"catalog {source}: providers[{index}]"
            _check_keys("provider", p, where)
            _check_api(p["api"], f"{where} ({p['name']})")
            key_env = p.get("keyEnv", [])
            self.providers[p["name"]] = ProviderInfo(
                name=p["name"],
                api=p["api"],
                key_env=tuple([key_env] if isinstance(key_env, str) else key_env),
                base_url=p.get("baseUrl"),
                compat=dict(p.get("compat") or {}),
                cloud=_cloud(p["cloud"], p["api"], f"{where} ({p['name']})") if "cloud" in p else None,
                hosted_tools=_hosted_tools(p["hostedTools"], f"{where} ({p['name']})") if "hostedTools" in p else None,
            )
        for index, m in enumerate(data.get("models", [])):
            where = (
                f"catalog {source}: models[{index}] ({m.get('provider')}/{m.get('id')})" if isinstance(m, dict) else ""
            )
            _check_keys("model", m, where or f"catalog {source}: models[{index}]")
            info = ModelInfo(
                provider=m["provider"],
                id=m["id"],
                pricing=_pricing(m.get("cost", {}), f"{where}: cost"),
                context_window=m.get("contextWindow"),
                max_tokens=m.get("maxTokens"),
                reasoning=bool(m.get("reasoning", False)),
                aliases=tuple(m.get("aliases", [])),
                hosted_tools=_hosted_tools(m["hostedTools"], where) if "hostedTools" in m else None,
            )
            replaced = self.models.get((info.provider, info.id))
            if replaced is not None:  # drop the replaced entry's aliases too
                for key in [k for k, v in self.models.items() if v is replaced]:
                    del self.models[key]
            self.models[(info.provider, info.id)] = info
            for alias in info.aliases:
                self.models[(info.provider, alias)] = info
        for index, r in enumerate(data.get("routes", [])):
            where = f"catalog {source}: routes[{index}]"
            _check_keys("route", r, where)
            name = r["name"]
            if not isinstance(name, str) or not ROUTE_NAME.match(name):
                raise CatalogError(
                    f"{where}: route name {name!r} must be letters, digits, '_', '.', ':' or '-' (no '/')"
                )
            fallback = r.get("fallback", [])
            pool = _pool(name, r["pool"], f"{where} ({name})") if "pool" in r else None
            if (pool is None) == ("model" not in r):
                raise CatalogError(f"{where} ({name}): a route has either model or pool")
            model = pool.deployments[0].ref if pool is not None else r["model"]
            if not isinstance(fallback, list) or not all(isinstance(f, str) for f in [model, *fallback]):
                raise CatalogError(f"{where} ({name}): model must be a string and fallback a list of strings")
            drop = r.get("dropParams", False)
            if not isinstance(drop, bool):
                raise CatalogError(f"{where} ({name}): dropParams must be true or false")
            self.routes[name] = CatalogRoute(name, model, tuple(fallback), r.get("description"), pool, drop)

    def validate(self, source: str = "catalog") -> None:
        """Every model's provider and every route entry's provider is in the catalog (checked after each file
        is added, so `source` is the file whose entries made it fail)."""
        known = ", ".join(sorted(self.providers))
        for info in self.listed():
            if info.provider not in self.providers:
                raise CatalogError(
                    f"catalog {source}: model {info.provider}/{info.id}: unknown provider {info.provider!r} (known: {known})"
                )
        for route in self.routes.values():
            for ref in route.entries:
                if ref in route.fallback and ref in self.routes:
                    continue  # a route as a fallback: checked as a route
                provider, _, model_id = ref.partition("/")
                if not model_id:
                    raise CatalogError(
                        f"catalog {source}: route {route.name!r}: {ref!r} must be '<provider>/<model id>'"
                    )
                if provider not in self.providers:
                    raise CatalogError(
                        f"catalog {source}: route {route.name!r}: {ref!r} names unknown provider {provider!r} (known: {known})"
                    )

    def model(self, provider: str, model_id: str) -> ModelInfo | None:
        return self.models.get((provider, model_id))

    def served_model(self, provider: str, model_id: str) -> ModelInfo:
        """The model a turn is served with: the catalog's entry (or an unlisted id at a price of 0), with its
        provider's `hostedTools` when it has none of its own."""
        info = self.models.get((provider, model_id)) or ModelInfo(provider, model_id, Pricing())
        if info.hosted_tools is None:
            entry = self.providers.get(provider)
            if entry is not None and entry.hosted_tools is not None:
                info = replace(info, hosted_tools=entry.hosted_tools)
        return info

    def listed(self) -> list[ModelInfo]:
        seen: dict[int, ModelInfo] = {}
        for info in self.models.values():
            seen.setdefault(id(info), info)
        return list(seen.values())

    def model_list(self, configured: Collection[str]) -> list[dict[str, Any]]:
        """`GET /v1/models` entries: OpenAI's model object (`id`, `object`, `created`, `owned_by`) plus the
        catalog's fields, for each listed model of a configured provider, then each route that one of them
        can serve (`owned_by: "gateway"`, with the fields of the model it names)."""
        entries: list[dict[str, Any]] = []
        for model in self.listed():
            if model.provider in configured:
                info = self.served_model(model.provider, model.id)  # with its provider's hostedTools
                entries.append(
                    {
                        "id": f"{info.provider}/{info.id}",
                        "object": "model",
                        "created": self.loaded_at,
                        "owned_by": info.provider,
                        "provider": info.provider,
                        "model": info.id,
                        "api": self.providers[info.provider].api,
                        **info.fields(),
                    }
                )
        for route in self.routes.values():
            if not any(ref.partition("/")[0] in configured for ref in route.entries):
                continue
            provider, _, model_id = route.model.partition("/")
            info = self.served_model(provider, model_id)
            shape: dict[str, Any] = {"model": route.model, "fallback": list(route.fallback)}
            if route.pool is not None:
                shape["pool"] = {
                    "strategy": route.pool.strategy,
                    "waitMs": route.pool.wait_ms,
                    "deployments": [
                        {"name": d.name, "provider": d.provider, "model": d.model, "weight": d.weight}
                        for d in route.pool.deployments
                    ],
                }
            entries.append(
                {
                    "id": route.name,
                    "object": "model",
                    "created": self.loaded_at,
                    "owned_by": "gateway",
                    "route": shape,
                    "description": route.description,
                    "provider": provider,
                    "model": info.id,
                    "api": self.providers[provider].api,
                    **info.fields(),
                }
            )
        return entries


def _pricing(cost: Any, where: str) -> Pricing:
    _check_keys("cost", cost, where)
    return Pricing(
        input=float(cost.get("input", 0)),
        output=float(cost.get("output", 0)),
        cache_read=float(cost.get("cacheRead", 0)),
        cache_write=float(cost.get("cacheWrite", 0)),
        cache_write_1h=float(cost["cacheWrite1h"]) if cost.get("cacheWrite1h") is not None else None,
    )


def _positive(value: Any, what: str, where: str, *, integer: bool) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        raise CatalogError(f"{where}: {what} must be a positive {'integer' if integer else 'number'}, got {value!r}")
    return value


def _pool(route: str, entry: Any, where: str) -> Pool:
    """A route's `pool`, checked whole: a bad entry names itself (`…: pool.deployments[1] (name): …`)."""
    _check_keys("pool", entry, f"{where}: pool")
    strategy = entry.get("strategy", "weighted")
    if strategy not in POOL_STRATEGIES:
        raise CatalogError(f"{where}: pool strategy {strategy!r} must be one of {', '.join(POOL_STRATEGIES)}")
    raw = entry.get("deployments")
    if not isinstance(raw, list) or not raw:
        raise CatalogError(f"{where}: pool.deployments must be a non-empty list")
    deployments: list[Deployment] = []
    for index, d in enumerate(raw):
        at = f"{where}: pool.deployments[{index}]"
        _check_keys("deployment", d, at)
        provider, model = d.get("provider"), d.get("model")
        if not isinstance(provider, str) or not provider or not isinstance(model, str) or not model:
            raise CatalogError(f"{at}: provider and model must be non-empty strings")
        name = d.get("name", f"{provider}/{model}")
        at = f"{at} ({name})"
        if not isinstance(name, str) or not name or any(ch in name for ch in "{}\n "):
            raise CatalogError(f"{at}: name must be a non-empty string without spaces or braces")
        if any(other.name == name for other in deployments):
            raise CatalogError(f"{at}: two deployments named {name!r}; give each a distinct name")
        deployments.append(
            Deployment(
                name=name,
                provider=provider,
                model=model,
                weight=float(_positive(d.get("weight", 1), "weight", at, integer=False)),
                rpm=_positive(d["rpm"], "rpm", at, integer=True) if "rpm" in d else None,
                tpm=_positive(d["tpm"], "tpm", at, integer=True) if "tpm" in d else None,
                max_in_flight=_positive(d["maxInFlight"], "maxInFlight", at, integer=True)
                if "maxInFlight" in d
                else None,
                first_event_timeout_ms=_positive(d["firstEventTimeoutMs"], "firstEventTimeoutMs", at, integer=True)
                if "firstEventTimeoutMs" in d
                else None,
                pricing=_pricing(d["cost"], f"{at}: cost") if "cost" in d else None,
            )
        )
    wait = entry.get("waitMs", 0)
    if isinstance(wait, bool) or not isinstance(wait, int) or wait < 0:
        raise CatalogError(f"{where}: pool.waitMs must be a whole number of milliseconds, 0 or more, got {wait!r}")
    tolerance: dict[str, Any] = {}  # lowest-latency's band, when the entry sets it (else Pool's defaults)
    for key, keyword in (("tolerancePercent", "tolerance_percent"), ("toleranceMs", "tolerance_ms")):
        if key in entry:
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise CatalogError(f"{where}: pool.{key} must be a number, 0 or more, got {value!r}")
            tolerance[keyword] = float(value)
    counting: dict[str, Any] = {}  # how many failures cool a deployment, when the entry sets it
    for key, keyword in (("failuresToCool", "failures_to_cool"), ("failureWindowMs", "failure_window_ms")):
        if key in entry:
            counting[keyword] = _positive(entry[key], f"pool.{key}", where, integer=True)
    if "healthCheck" in entry:  # active health checks of cooling deployments (off unless set)
        check = entry["healthCheck"]
        _check_keys("healthCheck", check, f"{where}: pool.healthCheck")
        counting["health_check_ms"] = _positive(
            check.get("intervalMs"), "pool.healthCheck.intervalMs", where, integer=True
        )
    return Pool(route, tuple(deployments), strategy, wait_ms=wait, **tolerance, **counting)
