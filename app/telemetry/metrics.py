"""Prometheus metrics (`GET /metrics`), fed by a turn observer and a few counters the HTTP layer bumps.

Every metric is named `gateway_*`; counters end in `_total`, durations are `_seconds` histograms. Labels are
bounded: `provider` (a configured provider), `model` (a catalog model id, or `other` for ids the catalog does
not list, so a client cannot grow the series without limit), `outcome` (`done | error | aborted`), `door`
(a door's name, `DOORS` in app/doors/registry.py, set by the server's routes) and `kind` (a small fixed
vocabulary per metric). Request ids and keys are never labels; a key's *name* is, on one metric:
`gateway_key_spend_usd_total{key}` (spend per client key name), unless `GATEWAY_METRICS_KEY_LABELS=false`
(then one unlabelled total), and `gateway_budget_used_ratio{team,key,period}` (a budgeted key's series only
with key labels on; a team's name is the operator's). `/metrics` needs no key unless `GATEWAY_METRICS_KEY` is set (docs/operations.md).

Multi-worker mode: when `PROMETHEUS_MULTIPROC_DIR` is set (before the process starts), prometheus-client
keeps values in files in that directory and `/metrics` aggregates every worker's files with a
`MultiProcessCollector`: counters and histograms summed over every worker that ran, each gauge by its
`multiprocess_mode` (live values summed over the live workers, `livesum`; the budget ratio the latest any live
worker set; the local-fallback flag the maximum over live workers). The `process_*` metrics describe one process
and are left out then. The directory must be empty when the gateway starts (the usual prometheus-client rule;
`python -m app` and the container's entrypoint see to it).
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess
from prometheus_client.process_collector import ProcessCollector

from app.catalog import Catalog
from app.core.job import TurnJob, TurnObserver
from app.core.settled import AttemptStep, NextStep, SettledTurn

OTHER_MODEL = "other"
TOKEN_KINDS = (("input", "input"), ("output", "output"), ("cacheRead", "cache_read"), ("cacheWrite", "cache_write"))

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600)
_OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get("prometheus_multiproc_dir") or None


class Metrics(TurnObserver):
    """The gateway's metrics. One per Gateway; added to `dispatcher.observers`."""

    def __init__(self, catalog: Catalog, *, key_labels: bool = True) -> None:
        """`key_labels`: label the spend counter with the client key's name (else one total for all keys)."""
        self.catalog = catalog
        self.key_labels = key_labels
        self.multiprocess = multiprocess_dir() is not None
        # In multiprocess mode the values live in files; the metrics need no registry of their own.
        own = None if self.multiprocess else CollectorRegistry(auto_describe=True)
        self._own = own
        pm = ("provider", "model")

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=own)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, registry=own, buckets=buckets)

        self.requests = counter(
            "gateway_requests_total",
            "Turns settled, by the provider and model that served them, outcome and door (client wire format)",
            (*pm, "outcome", "door"),
        )
        self.active = Gauge(
            "gateway_active_streams",
            "Turns in flight (streams and completions)",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.ttft = histogram(
            "gateway_time_to_first_token_seconds",
            "From request accepted to the first content event",
            pm,
            _LATENCY_BUCKETS,
        )
        self.duration = histogram(
            "gateway_stream_duration_seconds", "From request accepted to settlement", (*pm, "outcome"), _LATENCY_BUCKETS
        )
        self.upstream = histogram(
            "gateway_upstream_latency_seconds",
            "Time a turn spent waiting on upstreams (connecting, response headers, each next frame)",
            pm,
            _LATENCY_BUCKETS,
        )
        self.overhead = histogram(
            "gateway_overhead_seconds",
            "Turn duration minus the time spent waiting on upstreams (includes retry backoff and slow readers)",
            pm,
            _OVERHEAD_BUCKETS,
        )
        self.tokens = counter("gateway_tokens_total", "Tokens reported by the upstream, by kind", (*pm, "kind"))
        self.cost = counter("gateway_cost_usd_total", "Cost in USD from the catalog prices", pm)
        self.retries = counter("gateway_retries_total", "Attempts retried on the same provider and model", pm)
        self.fallbacks = counter(
            "gateway_fallbacks_total", "Turns that left this provider and model for the next fallback", pm
        )
        self.cancellations = counter(
            "gateway_cancellations_total", "Turns cancelled from outside (client, shutdown)", ("kind",)
        )
        self.timeouts = counter(
            "gateway_timeouts_total",
            "Attempts ended by a timeout (connect, first_event, idle, total, first_content, transport)",
            ("kind",),
        )
        self.late_frames = counter(
            "gateway_late_frames_dropped_total", "Upstream frames dropped after settlement", ("provider",)
        )
        self.events_sent = counter(
            "gateway_sse_events_sent_total", "SSE events written to clients (keep-alives not counted)"
        )
        self.rejected = counter(
            "gateway_rejected_requests_total", "Requests refused before a turn started, by kind", ("kind",)
        )
        self.ledger_dropped = counter(
            "gateway_ledger_writes_dropped_total",
            "Record writes dropped because the ledger queue was full (insert, complete, or content: kept without the message)",
            ("kind",),
        )
        self.ledger_queued = Gauge(
            "gateway_ledger_queue_bytes",
            "Memory of record writes waiting for the store",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.key_spend_usd = (
            counter("gateway_key_spend_usd_total", "USD spent by settled turns, by client key name", ("key",))
            if key_labels
            else counter("gateway_key_spend_usd_total", "USD spent by settled turns of client keys (all keys)")
        )
        # Budgets (docs/admin.md): a team's name (operator-defined) or, with key labels on, a key's name; the
        # period is `day` or `month`. End users' budgets have no series (their ids are the clients' to choose).
        self.budget_used = Gauge(
            "gateway_budget_used_ratio",
            "Spend of the current period over the budget (1 = spent), by team and key (empty: the team's own)",
            ("team", "key", "period"),
            registry=own,
            # Each worker sets it from the shared store's spend when it charges a turn: the latest value set is
            # the current one (a maximum would keep a worker's ratio from before the period reset).
            multiprocess_mode="livemostrecent",
        )
        self.limit_store_errors = counter(
            "gateway_limit_store_errors_total",
            "Calls to the limit store (Redis) that failed or timed out",
            ("operation",),
        )
        self.limits_local_fallback = Gauge(
            "gateway_limits_local_fallback",
            "1 while this replica enforces per-key limits alone because the limit store (Redis) does not answer "
            "(GATEWAY_REDIS_FAIL_OPEN=true): each replica admits up to the limit, N replicas up to N times it",
            registry=own,
            multiprocess_mode="livemax",  # 1 while any live worker is on its own (a stopped worker's value goes)
        )
        self.resumptions = counter("gateway_resumptions_total", "Resumable streams continued with GET /v1/stream/{id}")
        # Pools (docs/pools.md): labels are the catalog's pool (route) and deployment names, a bounded set.
        pd = ("pool", "deployment")
        self.pool_in_flight_gauge = Gauge(
            "gateway_pool_in_flight",
            "Attempts in flight on each pool deployment (this replica)",
            pd,
            registry=own,
            multiprocess_mode="livesum",
        )
        self.pool_cooldowns = counter(
            "gateway_pool_cooldowns_total",
            "Pool deployments cooled down, by why (rate_limited, server_error, connect, first_event_timeout)",
            (*pd, "reason"),
        )
        self.pool_ttft_seconds = histogram(
            "gateway_pool_ttft_seconds",
            "From an attempt's start to its first content event, per pool deployment",
            pd,
            _LATENCY_BUCKETS,
        )
        # Which cloud and region each cloud provider runs on (CONTRACT §9a): join on `provider` to split any metric
        # above by cloud; bounded by the catalog's providers.
        self.provider_cloud = Gauge(
            "gateway_provider_cloud_info",
            "Catalog providers that run their api on a cloud: 1 per provider, cloud and region",
            ("provider", "cloud", "region"),
            registry=own,
            multiprocess_mode="max",
        )
        for info in catalog.providers.values():
            if info.cloud is not None:
                self.provider_cloud.labels(info.name, info.cloud.kind, info.cloud.region or "").set(1)
        if own is not None:
            ProcessCollector(registry=own)

    # ----------------------------------------------------------------- exposition

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        if self.multiprocess:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        else:
            assert self._own is not None
            registry = self._own
        return generate_latest(registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        """This process is going away: drop its live gauge values from the shared directory."""
        if self.multiprocess:
            multiprocess.mark_process_dead(os.getpid())

    # ----------------------------------------------------------------- turn observer

    def model_label(self, provider: str, model: str) -> str:
        return model if self.catalog.model(provider, model) is not None else OTHER_MODEL

    def turn_started(self, job: TurnJob) -> None:
        self.active.inc()

    def turn_finished(self, job: TurnJob, settled: SettledTurn) -> None:
        self.active.dec()
        turn = job.turn
        message = settled.message
        requested = job.request.requested_model
        provider = message.get("provider") or requested.partition("/")[0]
        model = self.model_label(provider, message.get("model") or requested.partition("/")[2])
        outcome = settled.outcome
        self.requests.labels(provider, model, outcome, job.request.door).inc()

        self.duration.labels(provider, model, outcome).observe(settled.duration)
        if settled.ttft is not None:
            self.ttft.labels(provider, model).observe(settled.ttft)
        self.upstream.labels(provider, model).observe(settled.upstream_wait)
        self.overhead.labels(provider, model).observe(settled.overhead)

        usage = message.get("usage") or {}
        for field, kind in TOKEN_KINDS:
            count = usage.get(field) or 0
            if count > 0:
                self.tokens.labels(provider, model, kind).inc(count)
        cost = (usage.get("cost") or {}).get("total") or 0
        if cost > 0:
            self.cost.labels(provider, model).inc(cost)

        self._attempts(settled.steps)
        if settled.cancelled_by is not None:
            self.cancellations.labels(settled.cancelled_by).inc()
        if turn.late_frames:
            self.late_frames.labels(provider).inc(turn.late_frames)

    def _attempts(self, attempts: tuple[AttemptStep, ...]) -> None:
        for attempt in attempts:
            if attempt.timeout is not None:
                self.timeouts.labels(attempt.timeout).inc()
            if attempt.then is not None:
                labels = (attempt.provider, self.model_label(attempt.provider, attempt.model))
                (self.retries if attempt.then is NextStep.RETRY else self.fallbacks).labels(*labels).inc()

    # ----------------------------------------------------------------- HTTP layer

    def pool_in_flight(self, pool: str, deployment: str, delta: int) -> None:
        self.pool_in_flight_gauge.labels(pool, deployment).inc(delta)

    def pool_cooldown(self, pool: str, deployment: str, reason: str) -> None:
        self.pool_cooldowns.labels(pool, deployment, reason).inc()

    def pool_ttft(self, pool: str, deployment: str, seconds: float) -> None:
        self.pool_ttft_seconds.labels(pool, deployment).observe(seconds)

    def sse_events(self, count: int) -> None:
        if count:
            self.events_sent.inc(count)

    def rejected_request(self, kind: str) -> None:
        self.rejected.labels(kind).inc()

    # ----------------------------------------------------------------- ledger (app.ledger.LedgerMetrics)

    def ledger_queue(self, queued_bytes: int) -> None:
        self.ledger_queued.set(queued_bytes)

    def ledger_write_dropped(self, kind: str) -> None:
        self.ledger_dropped.labels(kind).inc()

    def key_spend(self, key: str, usd: float) -> None:
        (self.key_spend_usd.labels(key) if self.key_labels else self.key_spend_usd).inc(usd)

    def budget_used_ratio(self, team: str, key: str, period: str, ratio: float) -> None:
        self.budget_used.labels(team, key, period).set(ratio)

    def limit_store_error(self, operation: str) -> None:
        self.limit_store_errors.labels(operation).inc()

    def limits_local(self, in_effect: bool) -> None:
        self.limits_local_fallback.set(int(in_effect))
