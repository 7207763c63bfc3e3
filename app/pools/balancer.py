"""`Pools`: what the dispatcher asks of a pool — a deployment for this attempt (`acquire`), then `finish` it
(latency, tokens, affinity, the slot released) or `cool` it after a failure that says it is unwell."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
import uuid
from dataclasses import replace
from typing import Awaitable, Callable, Iterable, Mapping, Protocol, Sequence

from app.contract.catalog_entries import Deployment, Pool
from app.contract.failures import Attempt, ErrorKind, Interrupt
from app.contract.request import StreamOptions
from app.pools.choice import order
from app.pools.state import (
    AT_ONCE,
    BACKOFF,
    LONG_BACKOFF,
    Acquired,
    Busy,
    Finished,
    MemoryPoolStore,
    Placement,
    PoolStore,
    Snapshot,
    Threshold,
)

log = logging.getLogger("gateway.pools")


class PoolMetrics(Protocol):
    def pool_in_flight(self, pool: str, deployment: str, delta: int) -> None: ...
    def pool_cooldown(self, pool: str, deployment: str, reason: str) -> None: ...
    def pool_ttft(self, pool: str, deployment: str, seconds: float) -> None: ...


def now_ms() -> int:
    return int(time.time() * 1000)


# Headers agent CLIs send with every request of one session (Claude Code, Codex CLI, others).
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "x-session-id")


def session_header(headers: Mapping[str, str]) -> str | None:
    """The agent session id a request's headers carry, if any (at most 256 characters)."""
    for name in SESSION_HEADERS:
        value = headers.get(name)
        if value:
            return value[:256]
    return None


KEY_TEXT_MAX = 64  # a client-supplied conversation key longer than this is stored as its SHA-256


def conversation_key(options: StreamOptions, session: str | None = None, client: str | None = None) -> str | None:
    """The key that keeps a conversation on one deployment: `options.sessionId` (which the doors fill from
    OpenAI's `prompt_cache_key` and the Anthropic door's conversation hash), else the agent's session header
    (`session`), else the end user's id (`options.metadata.userId`, Anthropic's `metadata.user_id`).

    The key is scoped by the client key (`client`, the gateway API key's name: one tenant sending another's
    `prompt_cache_key` neither joins nor finds that conversation) and bounded: a client string longer than
    `KEY_TEXT_MAX` characters is stored as its SHA-256 (a 3 MB user id makes a 71-character key)."""
    raw: str | None = options.session_id or session
    if not raw:
        metadata = options.metadata
        user = metadata.get("userId") if isinstance(metadata, dict) else None
        raw = user if isinstance(user, str) and user else None
    if raw is None:
        return None
    return f"{_bounded(client or '-')}:{_bounded(raw)}"


def _bounded(text: str) -> str:
    if len(text) <= KEY_TEXT_MAX:
        return text
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# Statuses before content that say the deployment, not the request, is at fault: a key it refuses (401, 403)
# or a model it does not have (404). A plain route ends the turn on them; a pool moves to another deployment.
DEPLOYMENT_STATUS = {401: "credentials", 403: "credentials", 404: "model_not_found"}
LONG_COOLING = frozenset(DEPLOYMENT_STATUS.values())  # reasons cooled by `LONG_BACKOFF`, Retry-After ignored


def fails_over(kind: ErrorKind | str, status: int | None) -> bool:
    """Whether a failure that would end a plain route's turn (not retryable) moves a pool's turn on to its
    next deployment: a refused key or a missing model (`DEPLOYMENT_STATUS`), or a 429/5xx about the request
    itself (`ErrorKind.REQUEST_AT_FAULT`: too large for this deployment's tokens-per-minute limit may fit
    another's; the deployment is not cooled for it)."""
    return status in DEPLOYMENT_STATUS or kind == ErrorKind.REQUEST_AT_FAULT


def cooling_reason(attempt: Attempt) -> str | None:
    """Why a failed attempt cools its deployment (the `reason` label of `gateway_pool_cooldowns_total`), or None
    for a failure that says nothing about the deployment's health (a bad request, a refusal, a malformed
    stream, a 429 or 5xx about the request itself: `ErrorKind.REQUEST_AT_FAULT`, which one tenant's request
    must not cool a shared deployment for): a 429, a 5xx, a refused key (401/403), a missing model (404), a
    connection that could not be made, or no first event within its timeout."""
    if attempt.kind is ErrorKind.REQUEST_AT_FAULT:
        return None
    if attempt.http_status == 429:
        return "rate_limited"
    if attempt.http_status is not None and attempt.http_status >= 500:
        return "server_error"
    if attempt.http_status in DEPLOYMENT_STATUS:
        return DEPLOYMENT_STATUS[attempt.http_status]
    if attempt.kind in (ErrorKind.CONNECT, ErrorKind.CONNECT_TIMEOUT):
        return "connect"
    if attempt.interrupt is Interrupt.FIRST_EVENT:
        return "first_event_timeout"
    return None


RELEASE_WINDOW_SHARE = 0.25  # waiting turns are released over a quarter of their wait after the cooldown ends,
RELEASE_WINDOW_MIN_MS = 50  # at least 50 ms,
RELEASE_WINDOW_MAX_MS = 1_000  # at most a second


class Pools:
    def __init__(
        self, store: PoolStore | None = None, *, metrics: PoolMetrics | None = None, rng: random.Random | None = None
    ) -> None:
        self.store: PoolStore = store if store is not None else MemoryPoolStore()
        self.metrics = metrics
        self.rng = rng or random.Random()
        self._checking: dict[str, asyncio.Task[None]] = {}  # state id -> its health check running here

    async def acquire(
        self,
        pool: Pool,
        candidates: Sequence[Deployment],
        prices: dict[str, float],
        conversation: str | None,
        lease_ms: int,
        turn_seq: int = 0,
    ) -> Acquired | Busy:
        """A slot on the best of `candidates` that may be sent a request now (by the pool's strategy, the
        conversation's deployment first), or how long until the soonest may. The conversation is placed on
        the granted deployment at once (before the vendor is called, so its next turn finds it on any replica
        at any pace), unless a newer turn of it (a higher `turn_seq`: the turn's arrival, epoch ms) was
        placed already."""
        at = now_ms()
        keyed = [_by_state(d) for d in candidates]  # the store knows a deployment by its provider/model
        names = {d.ref: d.name for d in candidates}
        snapshot = await self.store.snapshot(pool.name, [d.name for d in keyed], conversation, at)
        state_prices = {d.ref: prices.get(d.name, 0.0) for d in candidates}
        ranked = order(pool, keyed, snapshot, at, self.rng, state_prices)
        placement = Placement(conversation, turn_seq) if conversation is not None else None
        grant = await self.store.acquire(pool.name, ranked, uuid.uuid4().hex, lease_ms, now_ms(), placement)
        if not isinstance(grant, Acquired):
            return grant
        grant = Acquired(names[grant.name], grant.lease)
        if self.metrics is not None:
            self.metrics.pool_in_flight(pool.name, grant.name, 1)
        return grant

    def release_delay_ms(self, ready_in_ms: int) -> float:
        """How long a turn waiting for a cooling deployment sleeps: until it is ready, plus a random share of
        a release window (a quarter of the wait, at least 50 ms, at most a second), so turns that waited
        together reach the deployment spread over that window, not all at the moment its cooldown ends."""
        window = min(max(ready_in_ms * RELEASE_WINDOW_SHARE, RELEASE_WINDOW_MIN_MS), RELEASE_WINDOW_MAX_MS)
        return ready_in_ms + self.rng.random() * window

    async def finish(self, pool: Pool, grant: Acquired, result: Finished) -> None:
        if self.metrics is not None:
            self.metrics.pool_in_flight(pool.name, grant.name, -1)
            if result.ttft is not None:
                self.metrics.pool_ttft(pool.name, grant.name, result.ttft)
        await self.store.finish(pool.name, _state_id(pool, grant.name), grant.lease, result, now_ms())

    async def cool(self, pool: Pool, name: str, reason: str, retry_after_ms: int | None) -> int | None:
        """Count a failure of `name` for `reason`, and cool it down once the pool's threshold is reached
        (`failuresToCool` within `failureWindowMs`; a 429 cools at once): a refused key or a missing model for
        `LONG_BACKOFF` (30 s doubling up to ten minutes), anything else for the vendor's Retry-After or
        `BACKOFF` (1 s up to a minute). Returns the cooldown's ms, or None when it was not cooled."""
        state = _state_id(pool, name)
        threshold = AT_ONCE
        if reason != "rate_limited" and pool.failures_to_cool > 1:
            threshold = Threshold(pool.failures_to_cool, pool.failure_window_ms)
        if reason in LONG_COOLING:
            ms = await self.store.cool(pool.name, state, None, now_ms(), reason, LONG_BACKOFF, threshold)
        else:
            ms = await self.store.cool(pool.name, state, retry_after_ms, now_ms(), reason, BACKOFF, threshold)
        if ms is None:
            return None
        if self.metrics is not None:
            self.metrics.pool_cooldown(pool.name, name, reason)
        log.info("pool %s: deployment %s cooled for %d ms (%s)", pool.name, name, ms, reason)
        return ms

    async def take_direct(self, ref: str, lease_ms: int) -> str:
        """Count a plain route's attempt on the provider/model `ref` that a pool lists (`listed`): a turn in
        flight and a request of its rpm window in that deployment's state, so the pool sees it. Not refused
        whatever that state (a plain route never waits on a pool's cooldown or quota). Returns its lease."""
        lease = uuid.uuid4().hex
        await self.store.take(ref, lease, lease_ms, now_ms())
        return lease

    async def finish_direct(self, ref: str, lease: str, result: Finished) -> None:
        """The end of a plain route's attempt counted by `take_direct`: the slot released, its latency and
        tokens noted (a success resets the cooldown streak)."""
        await self.store.finish("", ref, lease, result, now_ms())

    def check_health(self, pool: Pool, name: str, probe: Callable[[], Awaitable[bool]]) -> None:
        """With the pool's `healthCheck` on, probe its cooled deployment `name` every `intervalMs` (`probe`: the
        adapter's cheapest request, True when it answered) while it is cooling, and end its cooldown at the
        first success (its streak reset). One check per deployment state in this process at a time."""
        interval = pool.health_check_ms
        state = _state_id(pool, name)
        if interval is None or state in self._checking:
            return
        task = asyncio.create_task(self._check(pool, name, state, interval, probe), name=f"health-check-{state}")
        self._checking[state] = task
        task.add_done_callback(lambda _: self._checking.pop(state, None))

    async def _check(
        self, pool: Pool, name: str, state: str, interval_ms: int, probe: Callable[[], Awaitable[bool]]
    ) -> None:
        try:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                at = now_ms()
                snapshot = await self.store.snapshot(pool.name, [state], None, at)
                if snapshot.states[state].cooled_until_ms <= at:
                    return  # its cooldown ended (or another replica's check ended it)
                if await probe():
                    await self.store.recover(state, now_ms())
                    log.info("pool %s: deployment %s answered its health check; cooldown ended", pool.name, name)
                    return
        except Exception:  # a check never takes the gateway down; the cooldown simply runs its course
            log.exception("pool %s: health check of %s failed", pool.name, name)

    async def view(self, pool: Pool) -> Snapshot:
        """The state of every deployment of `pool` now, by its name (the console's view; every replica's with
        Redis)."""
        snapshot = await self.store.snapshot(pool.name, [d.ref for d in pool.deployments], None, now_ms())
        states = {d.name: snapshot.states[d.ref] for d in pool.deployments}
        return Snapshot(states, None, shared=snapshot.shared)

    async def aclose(self) -> None:
        for task in list(self._checking.values()):
            task.cancel()
        await self.store.aclose()


def listed(pools: Iterable[Pool]) -> dict[str, tuple[Pool, Deployment]]:
    """Each provider/model (`Deployment.ref`) some pool lists, with the first pool listing it and its
    deployment there: a plain route to it counts its traffic in that state (`Pools.take_direct`), and a failure
    of it cools the deployment by that pool's rules (`Pools.cool`: its failure threshold, the cooldown metric
    under its name)."""
    found: dict[str, tuple[Pool, Deployment]] = {}
    for pool in pools:
        for deployment in pool.deployments:
            found.setdefault(deployment.ref, (pool, deployment))
    return found


def _by_state(deployment: Deployment) -> Deployment:
    """`deployment` named by its state id, its provider entry and model (`Deployment.ref`): its cooldown,
    quotas' use, turns in flight and latency are the provider key's and model's, shared by every pool that
    lists it."""
    return deployment if deployment.name == deployment.ref else replace(deployment, name=deployment.ref)


def _state_id(pool: Pool, name: str) -> str:
    """The state id (`Deployment.ref`) of `pool`'s deployment `name`."""
    for deployment in pool.deployments:
        if deployment.name == name:
            return deployment.ref
    return name
