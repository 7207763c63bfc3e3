"""Admission: whether a stream may start now, as one ordered pipeline of checks. The first check that fails
refuses with its own `Refusal` (and counts it in `gateway_rejected_requests_total` by its kind).

A turn (`Gateway.start_turn`), in this order:

1. draining: the gateway is shutting down (`Draining`, 503 `shutting_down`);
2. the replica's stream cap, `GATEWAY_MAX_STREAMS`: its turns and open resumptions (`AtCapacity`, 429
   `too_many_streams`);
3. the key's stream cap on this replica, `GATEWAY_MAX_STREAMS_PER_KEY`, for a key without `concurrent_streams`
   of its own (`AtCapacity`, 429 `too_many_streams`);

   (the gateway then plans the turn's routes: an unknown model or a request no route honours is refused there)

4. a key with a budget asks for a model the catalog does not price (`UnpricedModel`, 403 `model_not_priced`);
5. the key's limits (`app.policy.limits.Limits.admit`): the models it may use (403 `model_not_allowed`), then
   in one atomic store call its budgets, tokens per minute, requests per minute and `concurrent_streams`
   across replicas (`LimitExceeded`, 429 with the limit's kind; 503 `limits_unavailable` when the store does
   not answer and the gateway fails closed).

A resumption (`Gateway.admit_resumption`) passes 2, 3 and the key's `concurrent_streams` (no draining check,
no rpm, tpm or budget: it starts no turn).

A token count (`Gateway.count_tokens`, which holds an upstream connection while it runs) passes 1, 2, 3, the
key's allowed models, then its requests per minute and `concurrent_streams` (no tpm or budget: it spends
nothing); while it runs it counts as one of the key's streams and of the replica's.

Per-key concurrency is one setting per key: its `concurrent_streams` when the keys file gives one, counted
across replicas by the limit store; otherwise `GATEWAY_MAX_STREAMS_PER_KEY`, counted by each replica.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol

from app.policy.keys import ClientKeys
from app.contract.limit_kinds import Rejection, StreamCap
from app.policy.limits import Limits
from app.contract.refusals import AtCapacity, Draining, UnpricedModel

if TYPE_CHECKING:
    from app.telemetry.metrics import Metrics
    from app.catalog.resolve import ModelResolver


class StreamCounts(Protocol):
    """What the stream caps count on this replica (the `Gateway` keeps it; read only here)."""

    @property
    def draining(self) -> bool: ...

    @property
    def jobs(self) -> Collection[object]:  # the turns running
        ...

    @property
    def resumptions(self) -> int:  # the resumption responses open
        ...

    @property
    def pending(self) -> int:  # admitted requests not (yet) a turn: token counts, turns reading stored state
        ...

    @property
    def streams_per_key(self) -> Counter[str]:  # turns and resumptions, by key
        ...


class Admission:
    def __init__(
        self,
        counts: StreamCounts,
        keys: ClientKeys,
        limits: Limits,
        resolver: "ModelResolver",
        metrics: "Metrics",
        *,
        max_streams: int,
        max_streams_per_key: int,
        allow_unpriced_models: bool,
    ) -> None:
        self.counts = counts
        self.keys = keys
        self.limits = limits
        self.resolver = resolver
        self.metrics = metrics
        self.max_streams = max_streams
        self.max_streams_per_key = max_streams_per_key  # the default of a key's `concurrent_streams`
        self.allow_unpriced_models = allow_unpriced_models  # `GATEWAY_ALLOW_UNPRICED_MODELS`

    # ------------------------------------------------------------------ a turn

    def check_capacity(self, key_id: str | None) -> None:
        """Steps 1-3, before the turn's routes are planned: refuse a new turn while draining or at a stream cap."""
        if self.counts.draining:
            self.metrics.rejected_request(Rejection.DRAINING)
            raise Draining("gateway shutting down")
        self.check_streams(key_id)

    async def admit_turn(
        self,
        key_id: str | None,
        requested: list[str],
        policy_names: list[str],
        request_id: str,
        user: str | None = None,
    ) -> None:
        """Steps 4 and 5, for the turn's model and fallbacks (`requested`, and the names a key's allowed models
        are matched against, `policy_names`). Admitted, the key's limits count the turn (settled by `Limits`)."""
        self.check_priced(key_id, requested, policy_names)
        await self.limits.admit(key_id, policy_names, request_id, user)

    # ------------------------------------------------------------------ a resumption

    async def admit_resumption(self, key_id: str | None, lease: str, *, turn_here: bool, turn_running: bool) -> None:
        """The stream caps and the key's `concurrent_streams` for a resumption, which holds `lease` (released by
        `Limits.release_stream`). The turn it reads does not count against it: `turn_here`, it runs on this
        replica; `turn_running`, it still runs (and holds a lease of the key's) somewhere."""
        self.check_streams(key_id, not_counted=int(turn_here))
        await self.limits.admit_stream(key_id, lease, alongside_turn=turn_running)

    # ------------------------------------------------------------------ a token count

    async def admit_count(self, key_id: str | None, policy_names: list[str], lease: str) -> None:
        """Steps 1-3, the key's allowed models, then its rpm and `concurrent_streams` for a token count, which
        holds `lease` (released by `Limits.release_stream`)."""
        self.check_capacity(key_id)
        await self.limits.admit_count(key_id, policy_names, lease)

    # ------------------------------------------------------------------ the checks

    def check_streams(self, key_id: str | None, not_counted: int = 0) -> None:
        """Steps 2 and 3: refuse one more stream at `GATEWAY_MAX_STREAMS`, or at `GATEWAY_MAX_STREAMS_PER_KEY`
        for a key without `concurrent_streams` of its own (turns, open resumptions, token counts running and turns
        admitted ahead of their stored state; `not_counted` of them left out)."""
        counts = self.counts
        if len(counts.jobs) + counts.resumptions + counts.pending - not_counted >= self.max_streams:
            self.metrics.rejected_request(StreamCap.MAX_STREAMS)
            raise AtCapacity(
                f"too many concurrent streams on this gateway (limit {self.max_streams})", StreamCap.MAX_STREAMS
            )
        if key_id is None or self.keys.policy(key_id).concurrent_streams:
            return  # no key, or the key's own cap, which the limit store counts across replicas (step 5)
        if counts.streams_per_key[key_id] - not_counted >= self.max_streams_per_key:
            self.metrics.rejected_request(StreamCap.MAX_STREAMS_PER_KEY)
            raise AtCapacity(
                f"too many concurrent streams for API key {key_id} (limit {self.max_streams_per_key})",
                StreamCap.MAX_STREAMS_PER_KEY,
            )

    def check_priced(self, key_id: str | None, requested: list[str], policy_names: list[str]) -> None:
        """Step 4: a key with a budget is never served a model the catalog has no price for (its turns would
        spend 0 and the budget would never stop them), unless the operator allows it
        (`GATEWAY_ALLOW_UNPRICED_MODELS`, or the key's `allow_unpriced_models`). Names the key may not use at
        all are left to step 5 (403 `model_not_allowed`)."""
        if key_id is None:
            return
        policy = self.keys.policy(key_id)
        if not policy.has_budget or policy.allow_unpriced_models or self.allow_unpriced_models:
            return
        for index, (name, policy_name) in enumerate(zip(requested, policy_names)):
            if not policy.allows_model(policy_name):
                continue
            served = self.resolver.unpriced(name)
            if served is None:
                continue
            model = f"{served.provider}/{served.model.id}"
            if served.pool is not None:  # the operator's fix: the deployment's price
                fix = f"the operator gives that deployment of route {name} a `cost` in the catalog (docs/pools.md)"
            else:
                fix = f"the operator adds `cost` to the catalog entry of {model}"
            self.metrics.rejected_request(Rejection.MODEL_NOT_PRICED)
            raise UnpricedModel(
                f"API key {key_id} has a budget and the catalog has no price for model {model}: its turns would "
                f"spend nothing against the budget. Fix: {fix}, or allows unpriced models "
                "(GATEWAY_ALLOW_UNPRICED_MODELS=true, or the key's allow_unpriced_models); meanwhile a client may "
                "name a model GET /v1/models lists with its prices",
                model,
                param="model" if index == 0 else f"fallback.{index - 1}",
            )
