"""The running gateway: settings, catalog, configured providers, the dispatcher and the turns in flight."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from app.admin.service import Admin
from app.admin.store import open_admin_store
from app.catalog import Catalog
from app.contract.attribution import Asked, Attribution, attribute
from app.contract.request import StreamOptions, StreamRequest
from app.core.counting import count_tokens
from app.core.dispatcher import Dispatcher
from app.contract.failures import Interrupt
from app.core.job import Route, TurnJob, TurnRequest
from app.ledger import LedgerObserver, open_ledger
from app.telemetry.logs import RequestLog
from app.redaction import register_secrets
from app.telemetry.metrics import Metrics
from app.policy.admission import Admission
from app.policy.keyring import ClientKey, KeyRing, parse_keys
from app.policy.budget_alerts import BudgetAlerts
from app.policy.keys import TEAM_SUBJECT, USER_SUBJECT, ClientKeys, watch_keys
from app.policy.limits import Limits
from app.policy.memory_store import MemoryLimitStore
from app.policy.store import LimitStore
from app.pools.balancer import Pools
from app.pools.state import MemoryPoolStore, PoolStore
from app.redis_client import redis_client
from app.resume.hub import ResumeHub
from app.resume.redis_store import RedisEvents
from app.providers import sampling
from app.providers.base import Provider
from app.providers.lazy import AdapterLoads
from app.providers.registry import build_providers
from app.providers.calls import DEMO_CALLER
from app.contract.refusals import RequestRejected
from app.settings import Settings
from app.stream.message import history_call_ids
from app.stream.turn import Turn

if TYPE_CHECKING:
    from app.ledger.shared_flush import SharedFlush

log = logging.getLogger("gateway")


class Gateway:
    def __init__(self, settings: Settings, providers: dict[str, Provider] | None = None) -> None:
        self.settings = settings
        self.catalog = Catalog.load(settings.catalog)
        client_keys = parse_keys(settings.api_keys.get_secret_value())
        admin_keys = parse_keys(settings.admin_keys.get_secret_value())
        # With admin keys, client keys are handed out managed: auth stays on while there are none yet.
        self.keys = ClientKeys(client_keys, settings.keys_file, required=bool(admin_keys))
        self.admin = Admin(open_admin_store(settings.database_url), self.keys, admin_keys, settings.admin_sync_interval)
        # The one key that reads GET /metrics, when the operator protects it (`GATEWAY_METRICS_KEY`).
        self.metrics_ring = (
            KeyRing([ClientKey("metrics", settings.metrics_key.get_secret_value())]) if settings.metrics_key else None
        )
        self.pools = Pools(_pool_store(settings))
        self.dispatcher = Dispatcher(
            providers if providers is not None else build_providers(settings, self.catalog.providers, lazy=True),
            self.catalog,
            settings,
            self.pools,
        )
        self.adapter_loads = AdapterLoads()  # the lazy providers' imports: a turn's before the warm-up's next one
        self.ledger = open_ledger(settings.database_url, settings)
        self.jobs: set[TurnJob] = set()
        self.streams = OpenStreams()  # the SSE responses open, turns' and resumptions' (ended by `app.server.shutdown`)
        self.draining = False  # set by `drain`: new turns are refused, `/readyz` answers 503
        # Set once the gateway serves: its listening sockets are set up (`app.server.hosting.bound_send_buffers`) and the
        # records of stopped gateway processes are marked (`app.main`). `/readyz` answers 503 until then.
        self.serving = asyncio.Event()
        self.streams_per_key: Counter[str] = Counter()  # turns and resumptions
        self.resumptions = 0  # open resumption responses (`admit_resumption`)
        # Admitted requests that are not (yet) a turn: token counts running (`count_tokens`) and turns admitted
        # before their stored state is read (`admit_ahead`). The stream caps count them.
        self.pending = 0
        self.metrics = Metrics(self.catalog, key_labels=settings.metrics_key_labels)
        self.pools.metrics = self.metrics
        self.dispatcher.observers.append(self.metrics)
        self.resume = _resume_hub(settings, self.metrics)
        # Records count the resumptions the hub saw (the recorder's lifespan: start() / aclose()).
        self.recorder = LedgerObserver.from_settings(
            self.ledger, settings, self.metrics, times_resumed=self.resume.times_resumed
        )
        self.dispatcher.observers.append(self.recorder)
        self.shared_flush = _shared_flush(settings, self.recorder.flush)
        self.dispatcher.observers.append(RequestLog(settings.log_content))
        limit_store = _limit_store(settings)
        self.limits = Limits(
            self.keys,
            limit_store,
            self._ledger_spend,
            ledger_last_cost=self._ledger_last_cost,
            fail_open=settings.redis_fail_open,
            timeout=settings.redis_timeout,
            lease_ttl=settings.redis_lease_ttl,
            metrics=self.metrics,
            alerts=BudgetAlerts(settings.budget_webhook_url, limit_store, timeout=settings.budget_webhook_timeout)
            if settings.budget_webhook_url
            else None,
        )
        self.dispatcher.observers.append(self.limits)
        self.admission = Admission(
            self,
            self.keys,
            self.limits,
            self.dispatcher.resolver,
            self.metrics,
            max_streams=settings.max_streams,
            max_streams_per_key=settings.max_streams_per_key,
            allow_unpriced_models=settings.allow_unpriced_models,
        )
        self.resume.on_resumed_late = self.recorder.resumed_late  # the record is written again with `resumed`
        self._keys_watch: asyncio.Task | None = None
        register_secrets(
            *(settings.provider_key(name) for name in ("anthropic", "openai", "google")),
            *(key.secret for key in client_keys),
            *(key.secret for key in admin_keys),
            settings.metrics_key.get_secret_value() if settings.metrics_key else None,
        )

    async def start(self) -> None:
        """Background work besides the ledger: the limits' lease renewal, the keys file watch and the managed
        keys (the admin store: migrated, loaded, then polled for changes)."""
        await self.admin.start()
        await self.limits.start()
        if self.shared_flush is not None:
            self.shared_flush.start()
        self._keys_watch = asyncio.create_task(
            watch_keys(self.keys, self.settings.keys_reload_interval), name="gateway-keys-watch"
        )

    async def warm_up(self) -> None:
        """Import every served provider's adapter and vendor SDK, one after the other and off the event loop
        (`app.providers.lazy`): run once the server listens, so that start-up does not wait for them and the first
        turn through a provider rarely does."""
        await self.adapter_loads.warm_up(self.dispatcher.providers.values())

    async def _ledger_spend(self, key_id: str, since_ms: int) -> float:
        """What the ledger says a key (or a team: `TEAM_SUBJECT`) spent since `since_ms` (queued record writes
        flushed first)."""
        await self.recorder.flush(timeout=1.0)
        if key_id.startswith(TEAM_SUBJECT):
            return await self.admin.store.team_spend(key_id.removeprefix(TEAM_SUBJECT), since_ms)
        if key_id.startswith(USER_SUBJECT):  # an end user of a key: the key's records naming that user
            key, user = key_id.removeprefix(USER_SUBJECT).split("/", 1)
            return await self.admin.store.user_spend(key, user, since_ms)
        return await self.ledger.spend(key_id, since_ms)

    async def flush_records(self, timeout: float) -> None:
        """Before a records read: the record writes queued so far are written, this process's and, with Redis,
        every other gateway process's (`app.ledger.shared_flush`), so a client reads its finished turn's record
        whichever worker or replica ran it. Bounded by `timeout`; the read goes on after it."""
        if self.shared_flush is not None:
            await self.shared_flush.everywhere(timeout)
        else:
            await self.recorder.flush(timeout)

    async def _ledger_last_cost(self, key_id: str) -> float:
        """What the key's latest settled turn cost, by the ledger (queued record writes flushed first)."""
        await self.recorder.flush(timeout=1.0)
        return await self.ledger.last_cost(key_id)

    async def start_turn(
        self,
        request: StreamRequest,
        request_id: str,
        key_id: str | None,
        door: str = "unified",
        session: str | None = None,
        resumable: bool = False,
        ahead: "AdmittedAhead | None" = None,
        asked: Asked | None = None,
    ) -> TurnJob:
        """Resolve the model and its fallbacks, apply the key's policy, then start the turn's pump. `door`
        names the client wire format the request came through (records and metrics show it). Admission's
        steps (`app.policy.admission`) run in order, with the routes planned between its stream caps and the
        key's policy. `session`: the agent session header the request carried (a pool's conversation key);
        `resumable`: its events are kept for resumption (`app.resume`); `ahead`: the turn's admission, done
        before its request was decoded (`admit_ahead`), taken over when it admitted the same models; `asked`: the
        attribution headers (`app.contract.attribution`)."""
        requested = [request.model, *request.fallback]
        if ahead is not None and ahead.requested != requested:
            ahead.release()
        if ahead is None or not ahead.open:
            self.admission.check_capacity(key_id)
        if not request.options.drop_params and self._drops_params(key_id, request.model):
            request.options.drop_params = True
        options = request.options
        planned = self.dispatcher.plan(request.model, request.fallback)
        # imported off the loop, the first time only; before the warm-up's next import
        await self.adapter_loads.for_turn(route.provider for route in planned)
        routes = self._honouring(planned, request)
        attribution = self._attribution(key_id, asked or Asked(), options)
        if ahead is not None and ahead.open:
            ahead.taken()
        else:
            names = [self.dispatcher.resolver.policy_name(name) for name in requested]
            await self.admission.admit_turn(key_id, requested, names, request_id, attribution.user)
        throttle = self.settings.throttle_ms if options.throttle_ms is None else options.throttle_ms
        turn = Turn(request_id, throttle_ms=throttle, max_pending_bytes=self.settings.max_pending_bytes)
        turn.builder.hosted = options.hosted_tools is not None  # the vendor's own searches reach the client
        turn.builder.taken_call_ids = history_call_ids(request.context)  # ids the vendor must not repeat
        admitted = TurnRequest(
            routes=tuple(routes),
            context=request.context,
            options=options,
            api_key_id=key_id,
            requested_model=request.model,
            fallback=tuple(request.fallback),
            door=door,
            session=session,
            resumable=resumable,
            attribution=attribution,
        )
        job = TurnJob(turn, admitted)
        context = None
        if self.settings.demo and key_id is not None:  # the demo simulator's log shows each key its own requests
            context = contextvars.copy_context()
            context.run(DEMO_CALLER.set, key_id)
        task = self.dispatcher.start(job, context)
        self.jobs.add(job)
        task.add_done_callback(lambda _: self.jobs.discard(job))
        if key_id is not None:
            self.streams_per_key[key_id] += 1
            task.add_done_callback(lambda _: self._release_key(key_id))
        return job

    def _attribution(self, key_id: str | None, asked: Asked, options: StreamOptions) -> Attribution:
        policy = self.keys.policy(key_id)
        user_id = options.metadata.get("userId") if options.metadata else None
        return attribute(
            asked,
            team=policy.team,
            key_tags=policy.tags,
            user_id=user_id if isinstance(user_id, str) else None,
            session_id=options.session_id,
        )

    async def count_tokens(self, request: StreamRequest, key_id: str | None, request_id: str) -> int:
        """The serving vendor's count of `request`'s input tokens (`app.core.counting`): the model it names
        resolved as a turn's first attempt would be, admitted as a count (`Admission.admit_count`: the stream
        caps, the key's allowed models, requests per minute and concurrent streams), then one call within the
        first-event timeout, counted as one of the key's streams while it runs."""
        route = self.dispatcher.plan(request.model, [])[0]
        lease = f"{request_id}~count"
        await self.admission.admit_count(key_id, [self.dispatcher.resolver.policy_name(request.model)], lease)
        self._hold(key_id)
        try:
            return await count_tokens(route, request, self.settings.first_event_timeout)
        finally:
            self._unhold(key_id)
            self.limits.release_stream(lease)

    async def admit_ahead(self, key_id: str | None, requested: list[str], request_id: str) -> "AdmittedAhead":
        """Admit a turn before its request is decoded: a body that builds on stored responses is admitted (the
        stream caps, the model's plan, the key's policy and limits) before any of them is read, so reading them
        is never done for a key its limits refuse. `requested`: its model, then its fallbacks. Until
        `start_turn` takes it (`ahead=`) it counts as one of the key's streams; `AdmittedAhead.release` gives
        back what it took if the turn does not start."""
        self.admission.check_capacity(key_id)
        self.dispatcher.plan(requested[0], requested[1:])  # an unknown model is a 404 before anything is read
        names = [self.dispatcher.resolver.policy_name(name) for name in requested]
        await self.admission.admit_turn(key_id, requested, names, request_id)
        self._hold(key_id)
        return AdmittedAhead(self, key_id, request_id, requested)

    def _hold(self, key_id: str | None) -> None:
        self.pending += 1
        if key_id is not None:
            self.streams_per_key[key_id] += 1

    def _unhold(self, key_id: str | None) -> None:
        self.pending -= 1
        if key_id is not None:
            self._release_key(key_id)

    def _drops_params(self, key_id: str | None, model: str) -> bool:
        """The operator's drop_params: the key's policy, or the catalog route the request names."""
        route = self.dispatcher.resolver.catalog.routes.get(model)
        return self.keys.policy(key_id).drop_params or (route is not None and route.drop_params)

    def _honouring(self, routes: list[Route], request: StreamRequest) -> list[Route]:
        """The plan without the fallbacks that cannot honour the request (`Provider.check_request`), checked
        before any upstream call. The first entry must honour it: otherwise its RequestRejected refuses the
        turn (400). A fallback that cannot (say, OpenAI Responses for a request with stop sequences, behind
        a catalog route) is left out rather than failing a turn its first choice can serve."""
        kept = []
        for index, route in enumerate(routes):
            try:
                route.provider.check_request(route.model, request.context, request.options)
                sampling.check(route.provider.api, route.provider.name, request.options)
            except RequestRejected as refusal:
                if index == 0:
                    raise
                log.info("fallback %s left out: %s", route.label, refusal.message)
                continue
            kept.append(route)
        return kept

    async def admit_resumption(self, key_id: str | None, request_id: str, *, turn_running: bool) -> Callable[[], None]:
        """A resumption is a stream: while open it counts against `GATEWAY_MAX_STREAMS` and the key's
        concurrent streams (`Admission.admit_resumption`), except that the turn it reads, while still running,
        does not count against it (a client that lost its connection may always take it up again). Raises a
        Refusal (429, 503); otherwise returns the release, to call once when it ends."""
        lease = f"{request_id}~resume~{uuid.uuid4().hex[:12]}"
        await self.admission.admit_resumption(
            key_id, lease, turn_here=request_id in self.resume.jobs, turn_running=turn_running
        )
        self.resumptions += 1
        if key_id is not None:
            self.streams_per_key[key_id] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.resumptions -= 1
            if key_id is not None:
                self._release_key(key_id)
            self.limits.release_stream(lease)

        return release

    def _release_key(self, key_id: str) -> None:
        self.streams_per_key[key_id] -= 1
        if self.streams_per_key[key_id] <= 0:
            del self.streams_per_key[key_id]

    async def drain(self, timeout: float) -> None:
        """Stop taking turns, let those in flight finish for up to `timeout`, then settle the rest (a step of
        `app.server.shutdown.shut_down`, and of the end of the lifespan with `timeout` 0)."""
        self.draining = True
        pending = [job.task for job in self.jobs if job.task is not None]
        if pending:
            _, still_running = await asyncio.wait(pending, timeout=timeout)
            for job in list(self.jobs):
                job.interrupt(Interrupt.SHUTDOWN)
            if still_running:
                await asyncio.wait(still_running, timeout=5)

    async def aclose(self) -> None:
        """Close every provider's SDK client (and its connection pool), the limits and the keys watch."""
        if self._keys_watch is not None:
            self._keys_watch.cancel()
            await asyncio.gather(self._keys_watch, return_exceptions=True)
        await self.admin.aclose()
        await self.limits.aclose()
        if self.shared_flush is not None:
            await self.shared_flush.aclose()
        await self.resume.aclose()
        await self.pools.aclose()
        for provider in self.dispatcher.providers.values():
            await provider.aclose()


class AdmittedAhead:
    """A turn admitted before its request was decoded (`Gateway.admit_ahead`): counted as one of the key's
    streams and holding what the key's limits took, until `start_turn` takes it over (`taken`) or `release`
    gives that back (the request stays counted in the key's requests per minute)."""

    def __init__(self, gateway: Gateway, key_id: str | None, request_id: str, requested: list[str]) -> None:
        self.gateway, self.key_id, self.request_id, self.requested = gateway, key_id, request_id, requested
        self.open = True

    def taken(self) -> None:
        """The turn starts: from now its job counts it and settles its limits."""
        if self.open:
            self.open = False
            self.gateway._unhold(self.key_id)

    def release(self) -> None:
        """The turn will not start (a 4xx, or the client left): give back what its admission took. Idempotent."""
        if self.open:
            self.taken()
            self.gateway.limits.release_stream(self.request_id)


class ExitingStream(Protocol):
    """An open SSE response as the shutdown sees it (`app.api.event_stream.EventStreamResponse`)."""

    def end_for_exit(self) -> None:
        """End now, with a clean end of stream (the server is exiting and the grace is over)."""


class OpenStreams:
    """The SSE responses open on a gateway (`Gateway.streams`), so that the shutdown can end those still open
    when its time is up. A response adds itself once its headers are sent and discards itself when it ends."""

    __slots__ = ("open", "closed")

    def __init__(self) -> None:
        self.open: set[ExitingStream] = set()
        self.closed = False  # the shutdown's time is up: a response that opens now is ended at once

    def add(self, stream: ExitingStream) -> None:
        if self.closed:
            stream.end_for_exit()
            return
        self.open.add(stream)

    def discard(self, stream: ExitingStream) -> None:
        self.open.discard(stream)

    def __len__(self) -> int:
        return len(self.open)

    def close_within(self, seconds: float) -> None:
        """End every response still open `seconds` from now (those that open meanwhile too)."""
        asyncio.get_running_loop().call_later(seconds, self.close)

    def close(self) -> None:
        self.closed = True
        for stream in list(self.open):
            self.open.discard(stream)
            stream.end_for_exit()


def _limit_store(settings: Settings) -> LimitStore:
    """Redis when `GATEWAY_REDIS_URL` is set (shared by replicas), else this process's memory."""
    if not settings.redis_url:
        return MemoryLimitStore()
    from app.policy.redis_store import RedisLimitStore

    client = redis_client(settings.redis_url, settings.redis_timeout, max_connections=RedisLimitStore.POOL_SIZE)
    return RedisLimitStore(client, settings.redis_prefix)


def _pool_store(settings: Settings) -> PoolStore:
    """Pools' cooldowns, in-flight counts, quotas and latency: in Redis when `GATEWAY_REDIS_URL` is set (shared by
    replicas, this process's memory while Redis is away), else this process's memory."""
    if not settings.redis_url:
        return MemoryPoolStore()
    from app.pools.redis_store import RedisPoolStore

    client = redis_client(settings.redis_url, settings.redis_timeout, max_connections=64)
    return RedisPoolStore(client, settings.redis_prefix, settings.redis_timeout)


def _shared_flush(settings: Settings, flush_local: Callable[[float], Awaitable[bool]]) -> "SharedFlush | None":
    """With `GATEWAY_REDIS_URL`: records reads wait for every process's queued writes (workers, replicas)."""
    if not settings.redis_url:
        return None
    from app.ledger.shared_flush import SharedFlush

    return SharedFlush(settings.redis_url, settings.redis_prefix, settings.redis_timeout, flush_local)


def _resume_hub(settings: Settings, metrics: Metrics) -> ResumeHub:
    """Resumable streams: kept in this process, and in Redis too when `GATEWAY_REDIS_URL` is set."""
    events = None
    if settings.redis_url:
        from app.resume.redis_store import events_client

        events = RedisEvents(
            events_client(settings.redis_url, settings.redis_timeout), settings.redis_prefix, settings.resume_ttl
        )
    return ResumeHub(
        grace_s=settings.resume_grace,
        ttl_s=settings.resume_ttl,
        cap=settings.resume_max_events,
        max_turn_bytes=settings.resume_max_turn_bytes,
        max_bytes=settings.resume_max_bytes,
        redis=events,
        timeout=settings.redis_timeout,
        metrics=metrics,
    )
