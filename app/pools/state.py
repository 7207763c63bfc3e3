"""What the balancer knows of each deployment, kept in this process (`MemoryPoolStore`) or in Redis, shared by
every replica (`RedisPoolStore`, `GATEWAY_REDIS_URL`).

Per deployment (its state id identifies it: the provider entry and model, `Deployment.ref`, so every pool
that lists the same provider key and model shares one state; `app.pools.balancer` names it so):

- its cooldown: until when it is skipped, and the streak of failures that grows the next backoff;
- its turns in flight: leases that expire on their own (a replica that dies leaks nothing for long);
- its quotas' use: requests of the last 60 s (`rpm`), tokens of this minute (`tpm`);
- its latency: EWMAs of the time to first token and of the gap between frames after it;
- the deployment each conversation key was last placed on (affinity), expiring after an hour unused.

A plain route to a provider/model some pool lists counts its traffic here too (`take`, `finish`, `cool`:
one deployment, one state, whichever way the traffic came). Three steps touch it per pooled turn: `snapshot` (the pool's state, one read), `acquire` (take a slot on the first
deployment of an ordered list that is neither cooled nor at a quota, atomically: two replicas never both
take the last request of a quota; and place the turn's conversation there, unless a newer turn of it was
placed already) and `finish` (release the slot; note latency and tokens). A failure that cools a deployment
adds `cool`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from app.contract.catalog_entries import Deployment

EWMA_ALPHA = 0.3  # weight of a new latency sample
COOL_BASE_MS = 1_000  # the first cooldown without a Retry-After; doubles with each repeat
COOL_CAP_MS = 60_000  # the longest backoff cooldown
LONG_COOL_BASE_MS = 30_000  # the first cooldown of a deployment that refused the key or lacks the model
LONG_COOL_CAP_MS = 600_000  # ... doubling up to ten minutes
RETRY_AFTER_CAP_MS = 300_000  # a vendor's Retry-After is honoured up to five minutes
STATE_TTL_MS = 86_400_000  # a deployment's state (cooldown streak, latency) forgotten after a day unused
AFFINITY_TTL_MS = 3_600_000  # a conversation's deployment forgotten after an hour without a turn
WINDOW_MS = 60_000  # the rpm window
CAPPED_RETRY_MS = 1_000  # a deployment at its `maxInFlight` is taken as ready in a second (when is unknown)


@dataclass(slots=True)
class DeploymentState:
    """One deployment's state at one moment (epoch ms times)."""

    cooled_until_ms: int = 0
    in_flight: int = 0
    rpm_used: int = 0
    rpm_free_at_ms: int = 0  # when the oldest request of the rpm window leaves it
    tpm_used: int = 0
    ttft: float | None = None  # EWMA, seconds; None before the first sample
    gap: float | None = None  # EWMA of the gap between frames after the first token, seconds
    sampled_at_ms: int = 0  # when the latest latency sample came (0: never)
    streak: int = 0  # failures in a row (each grows the next backoff; a success resets it)
    cool_reason: str | None = None  # why it was last cooled (`cooling_reason`), None if never

    def ready_at_ms(self, deployment: Deployment, now_ms: int) -> int:
        """When this deployment may be sent a request (`now_ms` or earlier: now): after its cooldown, once its
        quotas have room and, at its concurrency cap, about a second from now."""
        ready = self.cooled_until_ms
        if deployment.rpm is not None and self.rpm_used >= deployment.rpm:
            ready = max(ready, self.rpm_free_at_ms)
        if deployment.tpm is not None and self.tpm_used >= deployment.tpm:
            ready = max(ready, next_minute_ms(now_ms))
        if deployment.max_in_flight is not None and self.in_flight >= deployment.max_in_flight:
            ready = max(ready, now_ms + CAPPED_RETRY_MS)
        return ready


@dataclass(frozen=True, slots=True)
class Snapshot:
    states: dict[str, DeploymentState]  # deployment name -> state
    affinity: str | None  # the deployment the conversation was last placed on
    shared: bool = False  # read from Redis (every replica's state), not this process's own


@dataclass(frozen=True, slots=True)
class Acquired:
    """A slot taken on `name`; `lease` releases it (`finish`)."""

    name: str
    lease: str


@dataclass(frozen=True, slots=True)
class Busy:
    """Every candidate is cooled or at a quota; the soonest is ready in `ms`."""

    ms: int


@dataclass(frozen=True, slots=True)
class Finished:
    """How an attempt on a deployment went, for `finish`."""

    ok: bool  # served the turn (resets the cooldown streak)
    ttft: float | None = None  # seconds from the attempt's start to its first content event
    gap: float | None = None  # mean seconds between frames after that
    tokens: int = 0  # input + output, counted against `tpm`


@dataclass(frozen=True, slots=True)
class Placement:
    """A turn's conversation, placed on the deployment `acquire` grants: `key` the conversation key, `seq` the
    turn's order in it (its arrival, epoch ms). A placement never replaces one of a higher `seq`: a late turn
    (a slow one, one that failed over) never moves its conversation back from where a newer turn went."""

    key: str
    seq: int


def next_minute_ms(now_ms: int) -> int:
    return (now_ms // WINDOW_MS + 1) * WINDOW_MS


@dataclass(frozen=True, slots=True)
class Backoff:
    """A cooldown without a Retry-After: `base_ms` after the first failure, doubling with each failure in a
    row up to `cap_ms`."""

    base_ms: int
    cap_ms: int


@dataclass(frozen=True, slots=True)
class Threshold:
    """How many failures within `window_ms` cool a deployment (the pool's `failuresToCool`,
    `failureWindowMs`): fewer are counted, and cool nothing."""

    failures: int = 1
    window_ms: int = 60_000


AT_ONCE = Threshold()  # the first failure cools (a 429 always does)

BACKOFF = Backoff(COOL_BASE_MS, COOL_CAP_MS)  # throttling, server errors, connect failures, timeouts
LONG_BACKOFF = Backoff(LONG_COOL_BASE_MS, LONG_COOL_CAP_MS)  # a refused key, a model the deployment lacks


def cool_ms(streak: int, retry_after_ms: int | None, backoff: Backoff = BACKOFF) -> int:
    """How long a deployment cools after its `streak`-th failure in a row: the vendor's Retry-After (capped),
    else `backoff` (by default doubling from one second up to a minute)."""
    if retry_after_ms is not None:
        return max(0, min(retry_after_ms, RETRY_AFTER_CAP_MS))
    ms: int = backoff.base_ms * 2 ** max(streak - 1, 0)
    return min(ms, backoff.cap_ms)


def ewma(old: float | None, sample: float) -> float:
    return sample if old is None or math.isnan(old) else EWMA_ALPHA * sample + (1 - EWMA_ALPHA) * old


class PoolStore(Protocol):
    async def snapshot(self, pool: str, names: Sequence[str], affinity: str | None, now_ms: int) -> Snapshot: ...

    async def acquire(
        self,
        pool: str,
        ordered: Sequence[Deployment],
        lease: str,
        lease_ms: int,
        now_ms: int,
        placement: Placement | None = None,
    ) -> Acquired | Busy: ...

    async def take(self, name: str, lease: str, lease_ms: int, now_ms: int) -> None:
        """Count a request sent to `name` outside any pool (a plain route to the same provider/model): a turn
        in flight (`lease`, released by `finish`) and a request of its rpm window, whatever its state."""
        ...

    async def finish(self, pool: str, name: str, lease: str, result: Finished, now_ms: int) -> None: ...

    async def cool(
        self,
        pool: str,
        name: str,
        retry_after_ms: int | None,
        now_ms: int,
        reason: str | None = None,
        backoff: Backoff = BACKOFF,
        threshold: Threshold = AT_ONCE,
    ) -> int | None:
        """Count a failure of `name`, and cool it down once `threshold` is reached (`reason`: why, shown by the
        console; `backoff` without a Retry-After); returns the cooldown's length in ms, or None when it was
        not cooled (fewer failures in the window)."""
        ...

    async def recover(self, name: str, now_ms: int) -> None:
        """End `name`'s cooldown now and reset its failure streak (a health check found it well)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class _Local:
    cooled_until_ms: int = 0
    streak: int = 0
    cool_reason: str | None = None
    fails: int = 0  # failures counted toward a threshold of more than one, since `fails_since` (epoch ms)
    fails_since: int = 0
    leases: dict[str, int] = field(default_factory=dict)  # lease -> expiry ms
    requests: list[int] = field(default_factory=list)  # rpm window, epoch ms, oldest first
    tokens: dict[int, int] = field(default_factory=dict)  # minute -> tokens
    ttft: float | None = None
    gap: float | None = None
    sampled_at_ms: int = 0

    def trim(self, now_ms: int) -> None:
        if self.leases:
            for lease in [k for k, expiry in self.leases.items() if expiry <= now_ms]:
                del self.leases[lease]
        cut = now_ms - WINDOW_MS
        while self.requests and self.requests[0] <= cut:
            self.requests.pop(0)
        minute = now_ms // WINDOW_MS
        for old in [m for m in self.tokens if m != minute]:
            del self.tokens[old]

    def state(self, now_ms: int) -> DeploymentState:
        self.trim(now_ms)
        return DeploymentState(
            cooled_until_ms=self.cooled_until_ms,
            in_flight=len(self.leases),
            rpm_used=len(self.requests),
            rpm_free_at_ms=self.requests[0] + WINDOW_MS if self.requests else 0,
            tpm_used=self.tokens.get(now_ms // WINDOW_MS, 0),
            ttft=self.ttft,
            gap=self.gap,
            sampled_at_ms=self.sampled_at_ms,
            streak=self.streak,
            cool_reason=self.cool_reason,
        )


class MemoryPoolStore:
    """Per-process state: what a gateway without Redis (or with Redis down) balances on."""

    def __init__(self) -> None:
        self._deployments: dict[str, _Local] = {}  # a deployment's state id (provider/model) -> its state
        # (pool, key) -> (deployment, expiry ms, placement seq)
        self._affinity: dict[tuple[str, str], tuple[str, int, int]] = {}

    def _local(self, name: str) -> _Local:
        local = self._deployments.get(name)
        if local is None:
            local = self._deployments[name] = _Local()
        return local

    async def snapshot(self, pool: str, names: Sequence[str], affinity: str | None, now_ms: int) -> Snapshot:
        stuck = None
        if affinity is not None:
            entry = self._affinity.get((pool, affinity))
            if entry is not None and entry[1] > now_ms:
                stuck = entry[0]
        return Snapshot({name: self._local(name).state(now_ms) for name in names}, stuck)

    async def acquire(
        self,
        pool: str,
        ordered: Sequence[Deployment],
        lease: str,
        lease_ms: int,
        now_ms: int,
        placement: Placement | None = None,
    ) -> Acquired | Busy:
        soonest: int | None = None
        for deployment in ordered:
            local = self._local(deployment.name)
            ready = local.state(now_ms).ready_at_ms(deployment, now_ms)
            if ready > now_ms:
                soonest = ready if soonest is None else min(soonest, ready)
                continue
            local.leases[lease] = now_ms + lease_ms
            if deployment.rpm is not None:
                local.requests.append(now_ms)
            if placement is not None:
                self._place(pool, deployment.name, placement, now_ms)
            return Acquired(deployment.name, lease)
        return Busy(max(0, (soonest or now_ms) - now_ms))

    async def take(self, name: str, lease: str, lease_ms: int, now_ms: int) -> None:
        local = self._local(name)
        local.trim(now_ms)
        local.leases[lease] = now_ms + lease_ms
        local.requests.append(now_ms)

    def _place(self, pool: str, name: str, placement: Placement, now_ms: int) -> None:
        entry = self._affinity.get((pool, placement.key))
        if entry is not None and entry[1] > now_ms and entry[2] > placement.seq:
            return  # a newer turn of the conversation was placed already
        self._affinity[(pool, placement.key)] = (name, now_ms + AFFINITY_TTL_MS, placement.seq)
        if len(self._affinity) > 100_000:  # bounded: drop the expired, else the oldest half
            live = {k: v for k, v in self._affinity.items() if v[1] > now_ms}
            self._affinity = live if len(live) < 50_000 else dict(list(live.items())[len(live) // 2 :])

    async def finish(self, pool: str, name: str, lease: str, result: Finished, now_ms: int) -> None:
        local = self._local(name)
        local.leases.pop(lease, None)
        if result.ttft is not None:
            local.ttft = ewma(local.ttft, result.ttft)
            local.sampled_at_ms = now_ms
        if result.gap is not None:
            local.gap = ewma(local.gap, result.gap)
        if result.ok:
            local.streak = 0
        if result.tokens:
            minute = now_ms // WINDOW_MS
            local.tokens[minute] = local.tokens.get(minute, 0) + result.tokens

    async def cool(
        self,
        pool: str,
        name: str,
        retry_after_ms: int | None,
        now_ms: int,
        reason: str | None = None,
        backoff: Backoff = BACKOFF,
        threshold: Threshold = AT_ONCE,
    ) -> int | None:
        local = self._local(name)
        if threshold.failures > 1:
            if now_ms - local.fails_since > threshold.window_ms:
                local.fails, local.fails_since = 0, now_ms
            local.fails += 1
            if local.fails < threshold.failures:
                return None
            local.fails = local.fails_since = 0
        local.streak += 1
        local.cool_reason = reason
        ms = cool_ms(local.streak, retry_after_ms, backoff)
        local.cooled_until_ms = max(local.cooled_until_ms, now_ms + ms)
        return ms

    async def recover(self, name: str, now_ms: int) -> None:
        local = self._local(name)
        local.cooled_until_ms = min(local.cooled_until_ms, now_ms)
        local.streak = 0

    async def aclose(self) -> None:
        pass
