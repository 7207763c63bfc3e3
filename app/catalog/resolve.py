"""Model names as clients write them → the providers and models that serve them. One resolver for every door
(`/v1/stream`, `/v1/complete`, `/api/stream`, the OpenAI and Anthropic doors) and every `fallback` entry.

A name is, in this order:

1. a catalog route (`"fast"`): its model (or each deployment of its pool, marked with the pool: the
   dispatcher picks among them per turn, `app.pools`), then its fallback list (an entry may name another
   route); entries whose provider is not configured on this gateway are skipped (the route fails only when
   none is);
2. `"<provider>/<model id>"` when `<provider>` is a catalog provider; the id may contain `/` and may be an
   alias. An id the catalog does not list is still served (its prices then count as 0), except to a key with
   a budget (`Gateway.start_turn`, docs/replicas.md), when it can be sent as it is (`check_model_id`: a
   model id may end up in the vendor's URL, where it must stay one path segment);
3. a bare model id or alias that exactly one configured provider lists (`claude-sonnet-4-5`,
   `meta-llama/Llama-3.3-70B-Instruct-Turbo`). When several do, the request is refused naming them.

In demo mode (`app.catalog.demo_clouds`) rule 2 serves only what the catalog lists (an unlisted id gets the
unknown-model error a vendor would give, not a simulated reply), and the demo's own cloud providers answer only
to `<provider>/<model id>`, so a vendor's plain id (`gpt-5`) stays unambiguous.
Rule 3 also applies to a `<provider>/…` name whose provider is in the catalog but not configured, so
`openai/gpt-oss-120b` reaches the one configured provider that lists that id when `openai` has no key.
The plan of a request is its model's entries, then each of its own `fallback` entries' (a route used as a
fallback contributes its model and fallback list).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Collection, Sequence

from app.catalog import Catalog
from app.contract.catalog_entries import Deployment, ModelInfo, Pool
from app.contract.refusals import AmbiguousModel, RequestRejected, UnknownModel

# What no model id holds, on any vendor: a URL's query, fragment or escape, a backslash, whitespace and control
# characters (NUL included). The path adapters send the id inside the URL's path (Gemini and Vertex AI
# `…/models/<id>:streamGenerateContent`, Vertex AI's Claude `…/models/<id>:streamRawPredict`, Azure's
# `/deployments/<id>/…`), where any of these would end the path or change it.
_NEVER_IN_A_MODEL_ID = re.compile(r"[#?%\\\s\x00-\x1f\x7f]")
# Where the id is a path segment ahead of a `:verb` (Gemini, Vertex AI) or is one (Azure), `/` and `:` would
# change the resource or the method (`gemini-x:countTokens` asks for a count).
_PATH_SEGMENT_APIS = frozenset({"google-generative-ai"})
_PATH_SEGMENT_CLOUDS = frozenset({"vertex", "azure"})


def check_model_id(model_id: str, api: str, cloud: str | None) -> None:
    """Refuse (400, naming the model) a client's model id that cannot be sent as one: one that holds what no
    model id holds, has a `.` or `..` segment (a URL parser removes those, with the segment before), or, on an
    api or cloud that puts the id in its URL's path, a `/` or `:`. Bedrock's SDK percent-encodes the id itself;
    the other apis send it in the body."""
    problem = None
    if match := _NEVER_IN_A_MODEL_ID.search(model_id):
        problem = f"cannot contain {match.group()!r}"
    elif {".", ".."} & set(model_id.split("/")):
        problem = "cannot have a '.' or '..' segment"
    elif (api in _PATH_SEGMENT_APIS or cloud in _PATH_SEGMENT_CLOUDS) and (bad := set(model_id) & {"/", ":"}):
        problem = f"is one segment of the vendor's URL path and cannot contain {sorted(bad)[0]!r}"
    if problem is not None:
        raise RequestRejected(f"model {model_id!r}: a model id {problem}", param="model")


@dataclass(frozen=True, slots=True)
class Served:
    """One entry of the attempt plan: a configured provider and the model it is asked for."""

    provider: str
    model: ModelInfo
    pool: Pool | None = None  # one of a pool's deployments (`deployment`), chosen per turn by `app.pools`
    deployment: Deployment | None = None


class ModelResolver:
    """`served_unlisted(provider, model_id)`: whether rule 2 serves an id of a catalog provider; None: any id
    (demo mode: only what the catalog lists). `not_bare`: providers whose models answer only to
    `<provider>/<model id>` (demo mode: its own cloud entries)."""

    def __init__(
        self,
        catalog: Catalog,
        configured: Collection[str],
        served_unlisted: Callable[[str, str], bool] | None = None,
        not_bare: Collection[str] = (),
    ) -> None:
        self.catalog = catalog
        self.configured = frozenset(configured)
        self.served_unlisted = served_unlisted
        # bare id or alias → the configured providers that list it
        self._bare: dict[str, set[str]] = defaultdict(set)
        for provider, model_id in catalog.models:
            if provider in self.configured and provider not in not_bare:
                self._bare[model_id].add(provider)

    def plan(self, model: str, fallback: Sequence[str] = ()) -> list[Served]:
        """The attempts for a request: its model's, then each fallback entry's. A refusal names the field
        at fault in `param` (`model`, `fallback.0`, …)."""
        served: list[Served] = []
        for index, name in enumerate([model, *fallback]):
            try:
                served.extend(self.resolve(name))
            except (UnknownModel, AmbiguousModel, RequestRejected) as refusal:
                refusal.param = "model" if index == 0 else f"fallback.{index - 1}"
                raise
        return served

    def resolve(self, name: str) -> list[Served]:
        """The attempts one name stands for: one entry, or a route's model and fallback."""
        route = self.catalog.routes.get(name)
        if route is not None:
            served = self._route(name, {name})
            if not served:
                providers = ", ".join(dict.fromkeys(ref.partition("/")[0] for ref in route.entries))
                raise UnknownModel(f"{name}: route of {providers}, none of which is configured on this gateway")
            return served
        provider, _, model_id = name.partition("/")
        if model_id and provider in self.configured:
            if self.served_unlisted is not None and not self.served_unlisted(provider, model_id):
                raise UnknownModel(
                    f"{name}: provider '{provider}' does not list the model '{model_id}' "
                    "(GET /v1/models lists what is served; in demo mode also the simulator's scenarios)"
                )
            return [self._provider_model(name)]
        candidates = sorted(self._bare.get(name, ()))
        if len(candidates) == 1:
            return [self._served(candidates[0], name)]
        if candidates:
            raise AmbiguousModel(
                f"{name}: listed by several providers ({', '.join(candidates)}); "
                f"name one as '<provider>/{name}' ({', '.join(f'{c}/{name}' for c in candidates)})"
            )
        if model_id and provider in self.catalog.providers:
            raise UnknownModel(f"{name}: provider '{provider}' is not configured on this gateway")
        if model_id:
            raise UnknownModel(f"{name}: unknown provider '{provider}' (and no configured provider lists '{name}')")
        raise UnknownModel(
            f"{name}: unknown model: no route of that name and no configured provider lists it "
            "(name it as '<provider>/<model id>'; GET /v1/models lists what is served)"
        )

    def policy_name(self, name: str) -> str:
        """The name a key's allowed-model patterns are matched against: a route's own name (the operator
        allows a route by naming it), otherwise the `<provider>/<model id>` that serves it, so that a bare id
        or an alias is allowed exactly when the model it stands for is (`claude-sonnet-4-5` is matched as
        `anthropic/claude-sonnet-4-5`). For a name that `resolve` accepts."""
        if name in self.catalog.routes:
            return name
        served = self.resolve(name)[0]
        return f"{served.provider}/{served.model.id}"

    def unpriced(self, name: str) -> Served | None:
        """The first entry `name` stands for whose model the catalog does not list, hence has no price for
        (rule 2 serves such an id at a price of 0); None when the catalog prices every one. For a name that
        `resolve` accepts."""
        for served in self.resolve(name):
            if served.deployment is not None and served.deployment.pricing is not None:
                continue  # the pool prices this deployment itself
            if self.catalog.model(served.provider, served.model.id) is None:
                return served
        return None

    def _route(self, name: str, seen: set[str]) -> list[Served]:
        """A route's configured entries: its pool's deployments (or its model), then its fallbacks (a route
        named as a fallback contributes its own entries, once)."""
        route = self.catalog.routes[name]
        served: list[Served] = []
        if route.pool is not None:
            for d in route.pool.deployments:
                if d.provider in self.configured:
                    entry = self._served(d.provider, d.model)
                    model = replace(entry.model, pricing=d.pricing) if d.pricing is not None else entry.model
                    served.append(Served(d.provider, model, route.pool, d))
        elif route.model.partition("/")[0] in self.configured:
            served.append(self._provider_model(route.model))
        for ref in route.fallback:
            if ref in self.catalog.routes:
                if ref not in seen:
                    seen.add(ref)
                    served.extend(self._route(ref, seen))
            elif ref.partition("/")[0] in self.configured:
                served.append(self._provider_model(ref))
        return served

    def _provider_model(self, ref: str) -> Served:
        provider, _, model_id = ref.partition("/")
        if self.catalog.model(provider, model_id) is None:  # a client's id: the catalog's are the operator's
            info = self.catalog.providers[provider]
            check_model_id(model_id, info.api, info.cloud.kind if info.cloud is not None else None)
        return self._served(provider, model_id)

    def _served(self, provider: str, model_id: str) -> Served:
        return Served(provider, self.catalog.served_model(provider, model_id))
