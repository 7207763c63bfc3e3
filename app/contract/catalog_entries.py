"""The catalog's entries as plain data: providers (and the cloud one runs on), models with their prices, routes
and pools of deployments. `app.catalog` reads and checks the catalog files into these; the adapters, the event
stream (prices) and the dispatcher read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Pricing:
    """USD per million tokens. `cache_write` prices a prompt-cache write of the vendor's default duration
    (Anthropic's 5 minutes: 1.25 × input); `cache_write_1h` a 1-hour write (Anthropic: 2 × input), None when
    the catalog does not say (`one_hour_write`)."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    cache_write_1h: float | None = None

    @property
    def one_hour_write(self) -> float:
        """The price of a 1-hour cache write: the catalog's `cacheWrite1h`, else twice the input price (what
        Anthropic bills on its own API, Bedrock and Vertex AI)."""
        return self.cache_write_1h if self.cache_write_1h is not None else 2 * self.input


@dataclass(frozen=True, slots=True)
class Cloud:
    """Where a provider's api runs when it runs on a cloud rather than at its maker (CONTRACT §9a), checked
    against the cloud's descriptor (`app.providers.clouds`: which apis it runs, its auth modes, the fields it
    needs). Credentials never come from here: each cloud reads its standard chain, or the provider's `keyEnv`."""

    kind: str  # the cloud's name (a key of `CLOUDS`: bedrock, vertex, azure)
    region: str | None = None  # AWS region, Vertex AI location (`global` included); Azure: informational
    project: str | None = None  # Vertex AI project (None: the credentials' or GOOGLE_CLOUD_PROJECT's)
    api_version: str | None = None  # Azure's dated `api-version` (None: the v1 API path)
    auth: str = ""  # how the gateway authenticates to the cloud (one of its descriptor's `auth`)
    deployments: dict[str, str] = field(default_factory=dict)  # catalog model id -> the cloud's name for it (Azure)

    def upstream_model(self, model_id: str) -> str:
        """The name the cloud knows the catalog's `model_id` by (an Azure deployment name, else the id)."""
        return self.deployments.get(model_id, model_id)


@dataclass(frozen=True, slots=True)
class HostedTools:
    """Which of the vendor's own hosted tools the operator lets serve a client's hosted tool (catalog
    `hostedTools` of a model or provider; docs/adapters/web-search.md). Off unless the catalog says so: a hosted
    tool runs (and is billed) at the vendor, outside the gateway's view."""

    web_search: bool = False  # `webSearch: true` or `{maxUses}`: the vendor's web search
    web_search_max_uses: int | None = None  # searches per turn, where the vendor takes a bound (Anthropic)

    def wire(self) -> dict[str, Any]:
        """As the catalog writes it (`GET /v1/models` shows it)."""
        uses = self.web_search_max_uses
        return {"webSearch": {"maxUses": uses} if self.web_search and uses is not None else self.web_search}


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    name: str
    api: str
    key_env: tuple[str, ...] = ()
    base_url: str | None = None
    compat: dict[str, Any] = field(default_factory=dict)  # per-vendor wire differences (api `openai-completions`)
    cloud: Cloud | None = None  # None: the api's maker serves it
    hosted_tools: HostedTools | None = None  # its models' default (a model's own `hostedTools` replaces it)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    provider: str
    id: str
    pricing: Pricing
    context_window: int | None = None
    max_tokens: int | None = None
    reasoning: bool = False
    aliases: tuple[str, ...] = ()
    hosted_tools: HostedTools | None = None  # None: its provider's (`Catalog.served_model`), else none

    def fields(self) -> dict[str, Any]:
        """The catalog's fields of this model, as `GET /v1/models` shows them."""
        p = self.pricing
        return {
            "reasoning": self.reasoning,
            "contextWindow": self.context_window,
            "maxTokens": self.max_tokens,
            "cost": {"input": p.input, "output": p.output, "cacheRead": p.cache_read, "cacheWrite": p.cache_write},
            "aliases": list(self.aliases),
            **({"hostedTools": self.hosted_tools.wire()} if self.hosted_tools is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class CatalogRoute:
    """A name clients use as their model; the operator decides what serves it (`model`, then `fallback`)."""

    name: str
    model: str  # "<provider>/<model id>"; for a pool, its first deployment's
    fallback: tuple[str, ...] = ()
    description: str | None = None
    pool: "Pool | None" = None  # served by a pool of deployments (then `model` is only what /v1/models shows)
    # Its turns drop the sampling fields the serving vendor cannot honour instead of refusing them
    # (`app.providers.sampling`; docs/api.md, "Sampling fields and drop_params").
    drop_params: bool = False

    @property
    def entries(self) -> tuple[str, ...]:
        """Its `<provider>/<model id>` entries: the pool's deployments (or its model), then its fallbacks."""
        served = tuple(d.ref for d in self.pool.deployments) if self.pool is not None else (self.model,)
        return (*served, *self.fallback)


@dataclass(frozen=True, slots=True)
class Deployment:
    """One deployment of a pool: a provider entry (its own key, base URL, region or cloud) and the vendor's model
    id there, with its share of the traffic and its own quotas and prices (CONTRACT §9b, docs/pools.md)."""

    name: str  # unique in its pool; default "<provider>/<model>"
    provider: str
    model: str
    weight: float = 1.0
    rpm: int | None = None  # requests per minute this deployment may be sent (None: no quota)
    tpm: int | None = None  # tokens (input + output) per minute
    max_in_flight: int | None = None  # attempts it may have in flight at once, across replicas (None: no cap)
    first_event_timeout_ms: int | None = None  # its own first-event timeout (None: GATEWAY_FIRST_EVENT_TIMEOUT)
    pricing: Pricing | None = None  # None: the catalog's prices of `provider/model`

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass(frozen=True, slots=True)
class Pool:
    """Deployments that serve one route, and how one is chosen for each turn (`POOL_STRATEGIES`)."""

    name: str  # the route's name
    deployments: tuple[Deployment, ...]
    strategy: str = "weighted"
    # When every deployment is cooling or at a quota: wait for the soonest if it is ready within this many ms,
    # else (and by default) answer at once with 429 and Retry-After.
    wait_ms: int = 0
    # lowest-latency: deployments whose estimate is within this share of the best's, or this many ms of it,
    # share the traffic by weight (docs/pools.md)
    tolerance_percent: float = 10.0
    tolerance_ms: float = 20.0
    # A deployment is cooled after this many failures within `failure_window_ms` (a 429 cools at once)
    failures_to_cool: int = 1
    failure_window_ms: int = 60_000
    # Probe a cooling deployment every this many ms with a cheap request, ending its cooldown early on success
    # (`healthCheck.intervalMs`; None: no health checks)
    health_check_ms: int | None = None
