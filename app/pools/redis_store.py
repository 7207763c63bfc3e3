"""Pool state in Redis, shared by every replica: one Lua script per step, which Redis runs atomically.

Keys (under `GATEWAY_REDIS_PREFIX`, default `gw`; `<D>` a deployment's state id, its provider entry and model
`<provider>/<model>`, shared by every pool that lists it; `<P>` the pool's name):

- `<p>:pool:dep:<D>`: hash `cool` (cooled until, epoch ms), `streak` (failures in a row), `reason` (why it was
  last cooled), `ttft` and `gap` (latency EWMAs, seconds) and `at` (the latest sample's time); expires a day
  after its last write;
- `<p>:pool:dep:<D>:fly`: sorted set of the turns in flight's leases, scored by their expiry;
- `<p>:pool:dep:<D>:rpm`: sorted set of the leases of the last 60 s, scored by their time (deployments with rpm,
  and every plain route's request to the provider/model);
- `<p>:pool:dep:<D>:tpm:<minute>`: tokens settled in that minute (expires after two minutes);
- `<p>:pool:<P>:aff:<client key name>:<conversation key>`: `<D>|<seq>`, where the conversation's latest turn
  (`seq`: its arrival, epoch ms) was placed (an hour; either part longer than 64 characters as
  `sha256-<hex>`).

Redis down or slow (`GATEWAY_REDIS_TIMEOUT`): the pool falls back to this process's own state
(`MemoryPoolStore`) for that call and logs it; a pool never refuses a turn because Redis is away. Times come
from the replicas' clocks (epoch ms), as the limit store's do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Sequence

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.contract.catalog_entries import Deployment
from app.pools.state import (
    AFFINITY_TTL_MS,
    BACKOFF,
    CAPPED_RETRY_MS,
    EWMA_ALPHA,
    RETRY_AFTER_CAP_MS,
    STATE_TTL_MS,
    WINDOW_MS,
    Acquired,
    Backoff,
    Busy,
    DeploymentState,
    Finished,
    MemoryPoolStore,
    Placement,
    Snapshot,
    Threshold,
    AT_ONCE,
    next_minute_ms,
)
from app.redis_client import bounded

log = logging.getLogger("gateway.pools")

# KEYS: per deployment (hash, fly, rpm, tpm), then the affinity key (or a dummy). ARGV: now, deployments.
_SNAPSHOT = """
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
  local h, fly, rpm, tpm = KEYS[i*4+1], KEYS[i*4+2], KEYS[i*4+3], KEYS[i*4+4]
  redis.call('ZREMRANGEBYSCORE', fly, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', rpm, '-inf', now - 60000)
  local state = redis.call('HMGET', h, 'cool', 'ttft', 'gap', 'at', 'streak', 'reason')
  local oldest = redis.call('ZRANGE', rpm, 0, 0, 'WITHSCORES')
  table.insert(out, state[1] or '0')
  table.insert(out, tostring(redis.call('ZCARD', fly)))
  table.insert(out, tostring(redis.call('ZCARD', rpm)))
  table.insert(out, oldest[2] or '0')
  table.insert(out, redis.call('GET', tpm) or '0')
  table.insert(out, state[2] or '')
  table.insert(out, state[3] or '')
  table.insert(out, state[4] or '0')
  table.insert(out, state[5] or '0')
  table.insert(out, state[6] or '')
end
table.insert(out, redis.call('GET', KEYS[n*4+1]) or '')
return out
"""

# KEYS: per candidate in order (hash, fly, rpm, tpm), then the affinity key (or a dummy). ARGV: now, lease ms,
# lease, next minute ms, candidates, placement seq (-1: none), affinity ttl, capped retry ms, then per candidate
# its rpm and tpm quota and its cap on attempts in flight (0: none) and name. Returns {index (1-based; 0: none), ms until the soonest is ready}. A placement is
# written `<deployment>|<seq>`, and never over one of a higher seq.
_ACQUIRE = """
local now = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local lease = ARGV[3]
local next_minute = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local seq = tonumber(ARGV[6])
local soonest = -1
local function later(t) if soonest < 0 or t < soonest then soonest = t end end
for i = 0, n - 1 do
  local h, fly, rpm, tpm = KEYS[i*4+1], KEYS[i*4+2], KEYS[i*4+3], KEYS[i*4+4]
  local rpm_quota, tpm_quota, cap = tonumber(ARGV[9 + i*4]), tonumber(ARGV[10 + i*4]), tonumber(ARGV[11 + i*4])
  local ready = tonumber(redis.call('HGET', h, 'cool') or '0')
  if cap > 0 then
    redis.call('ZREMRANGEBYSCORE', fly, '-inf', now)
    if redis.call('ZCARD', fly) >= cap then ready = math.max(ready, now + tonumber(ARGV[8])) end
  end
  if rpm_quota > 0 then
    redis.call('ZREMRANGEBYSCORE', rpm, '-inf', now - 60000)
    if redis.call('ZCARD', rpm) >= rpm_quota then
      local oldest = redis.call('ZRANGE', rpm, 0, 0, 'WITHSCORES')
      ready = math.max(ready, tonumber(oldest[2]) + 60000)
    end
  end
  if tpm_quota > 0 and tonumber(redis.call('GET', tpm) or '0') >= tpm_quota then
    ready = math.max(ready, next_minute)
  end
  if ready > now then
    later(ready)
  else
    redis.call('ZADD', fly, now + lease_ms, lease)
    redis.call('PEXPIRE', fly, lease_ms * 2)
    if rpm_quota > 0 then
      redis.call('ZADD', rpm, now, lease)
      redis.call('PEXPIRE', rpm, 60000)
    end
    if seq >= 0 then
      local aff = KEYS[n*4+1]
      local old = redis.call('GET', aff)
      local old_seq = -1
      if old then old_seq = tonumber(string.match(old, '|(%d+)$') or '-1') end
      if seq >= old_seq then redis.call('SET', aff, ARGV[12 + i*4] .. '|' .. seq, 'PX', tonumber(ARGV[7])) end
    end
    return {i + 1, 0}
  end
end
if soonest < 0 then soonest = now end
return {0, soonest - now}
"""

# KEYS: fly, rpm. ARGV: now, lease ms, lease. A request sent outside any pool: in flight and in the rpm window.
_TAKE = """
local now, lease_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + lease_ms, ARGV[3])
redis.call('PEXPIRE', KEYS[1], lease_ms * 2)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000)
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('PEXPIRE', KEYS[2], 60000)
return 1
"""

# KEYS: hash, fly, tpm (this minute). ARGV: lease, ok, ttft, gap, tokens, alpha, state ttl, now.
_FINISH = """
redis.call('ZREM', KEYS[2], ARGV[1])
local alpha = tonumber(ARGV[6])
for i, field in ipairs({'ttft', 'gap'}) do
  local sample = ARGV[2 + i]
  if sample ~= '' then
    local old = redis.call('HGET', KEYS[1], field)
    local value = tonumber(sample)
    if old then value = alpha * value + (1 - alpha) * tonumber(old) end
    redis.call('HSET', KEYS[1], field, tostring(value))
  end
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'at', ARGV[8]) end
if ARGV[2] == '1' then redis.call('HDEL', KEYS[1], 'streak') end
local tokens = tonumber(ARGV[5])
if tokens > 0 then
  redis.call('INCRBY', KEYS[3], tokens)
  redis.call('PEXPIRE', KEYS[3], 120000)
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[7])) end
return 1
"""

# KEYS: hash. ARGV: now, Retry-After ms (-1: none), base ms, cap ms, Retry-After cap ms, state ttl, reason,
# failures that cool, their window ms. Returns the cooldown's ms, or -1 (fewer failures in the window: not cooled).
# The backoff rule is `app.pools.state.cool_ms`.
_COOL = """
local now = tonumber(ARGV[1])
local retry_after = tonumber(ARGV[2])
local threshold, window = tonumber(ARGV[8]), tonumber(ARGV[9])
if threshold > 1 then
  local counted = redis.call('HMGET', KEYS[1], 'fails', 'since')
  local fails, since = tonumber(counted[1] or '0'), tonumber(counted[2] or '0')
  if now - since > window then fails, since = 0, now end
  fails = fails + 1
  if fails < threshold then
    redis.call('HSET', KEYS[1], 'fails', fails, 'since', since)
    redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[6]))
    return -1
  end
  redis.call('HDEL', KEYS[1], 'fails', 'since')
end
local streak = redis.call('HINCRBY', KEYS[1], 'streak', 1)
local ms
if retry_after >= 0 then
  ms = math.max(0, math.min(retry_after, tonumber(ARGV[5])))
else
  ms = math.min(tonumber(ARGV[3]) * 2 ^ (streak - 1), tonumber(ARGV[4]))
end
local untl = math.max(tonumber(redis.call('HGET', KEYS[1], 'cool') or '0'), now + ms)
redis.call('HSET', KEYS[1], 'cool', tostring(untl), 'reason', ARGV[7])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[6]))
return ms
"""

# KEYS: hash. ARGV: now. A health check found the deployment well: its cooldown ends now, its streak resets.
_RECOVER = """
local cool = tonumber(redis.call('HGET', KEYS[1], 'cool') or '0')
if cool > tonumber(ARGV[1]) then redis.call('HSET', KEYS[1], 'cool', ARGV[1]) end
redis.call('HDEL', KEYS[1], 'streak')
return 1
"""


class RedisPoolStore:
    def __init__(self, client: Redis, prefix: str, timeout: float) -> None:
        self.redis = client
        self.prefix = prefix
        self.timeout = timeout
        self.local = MemoryPoolStore()  # what this replica balances on while Redis is away
        self._snapshot = client.register_script(_SNAPSHOT)
        self._acquire = client.register_script(_ACQUIRE)
        self._take = client.register_script(_TAKE)
        self._finish = client.register_script(_FINISH)
        self._cool = client.register_script(_COOL)
        self._recover = client.register_script(_RECOVER)
        self._warned_at = 0.0

    def _keys(self, name: str, now_ms: int) -> list[str]:
        base = f"{self.prefix}:pool:dep:{name}"
        return [base, f"{base}:fly", f"{base}:rpm", f"{base}:tpm:{now_ms // WINDOW_MS}"]

    def _affinity_key(self, pool: str, key: str | None) -> str:
        return f"{self.prefix}:pool:{pool}:aff:{key}" if key is not None else f"{self.prefix}:pool:{pool}:aff:"

    def _down(self, operation: str, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._warned_at > 10:  # one line per ten seconds, not one per turn
            self._warned_at = now
            log.warning(
                "pool state: Redis %s failed (%s); balancing on this replica's own state", operation, type(exc).__name__
            )

    async def snapshot(self, pool: str, names: Sequence[str], affinity: str | None, now_ms: int) -> Snapshot:
        keys = [key for name in names for key in self._keys(name, now_ms)] + [self._affinity_key(pool, affinity)]
        try:
            raw = await bounded(self._snapshot(keys=keys, args=[now_ms, len(names)]), self.timeout)
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("snapshot", exc)
            return await self.local.snapshot(pool, names, affinity, now_ms)
        states: dict[str, DeploymentState] = {}
        for index, name in enumerate(names):
            cool, fly, rpm, oldest, tpm, ttft, gap, at, streak, reason = raw[index * 10 : index * 10 + 10]
            states[name] = DeploymentState(
                cooled_until_ms=int(float(cool)),
                in_flight=int(fly),
                rpm_used=int(rpm),
                rpm_free_at_ms=int(float(oldest)) + WINDOW_MS if int(rpm) else 0,
                tpm_used=int(tpm),
                ttft=float(ttft) if ttft else None,
                gap=float(gap) if gap else None,
                sampled_at_ms=int(float(at)),
                streak=int(streak),
                cool_reason=reason or None,
            )
        stuck = str(raw[-1]).rpartition("|")[0] or raw[-1] or None  # `<deployment>|<seq>`
        return Snapshot(states, stuck if affinity is not None else None, shared=True)

    async def acquire(
        self,
        pool: str,
        ordered: Sequence[Deployment],
        lease: str,
        lease_ms: int,
        now_ms: int,
        placement: Placement | None = None,
    ) -> Acquired | Busy:
        keys = [key for d in ordered for key in self._keys(d.name, now_ms)]
        keys.append(self._affinity_key(pool, placement.key if placement is not None else None))
        seq = placement.seq if placement is not None else -1
        args: list[int | str] = [now_ms, lease_ms, lease, next_minute_ms(now_ms), len(ordered), seq, AFFINITY_TTL_MS]
        args.append(CAPPED_RETRY_MS)
        for d in ordered:
            args += [d.rpm or 0, d.tpm or 0, d.max_in_flight or 0, d.name]
        try:
            # Not `bounded`: a cancellation this call dropped is raised where the attempt opens the upstream
            # (`TurnJob.raise_dropped_interrupt`), inside the dispatcher's `try` whose `finally` frees the lease.
            async with asyncio.timeout(self.timeout):
                index, wait_ms = await self._acquire(keys=keys, args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("acquire", exc)
            return await self.local.acquire(pool, ordered, lease, lease_ms, now_ms, placement)
        if int(index) == 0:
            return Busy(int(wait_ms))
        return Acquired(ordered[int(index) - 1].name, lease)

    async def take(self, name: str, lease: str, lease_ms: int, now_ms: int) -> None:
        _, fly, rpm, _ = self._keys(name, now_ms)
        try:  # not `bounded`, as `acquire`: it takes a lease the caller's `finally` frees
            async with asyncio.timeout(self.timeout):
                await self._take(keys=[fly, rpm], args=[now_ms, lease_ms, lease])
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("take", exc)
            await self.local.take(name, lease, lease_ms, now_ms)

    async def finish(self, pool: str, name: str, lease: str, result: Finished, now_ms: int) -> None:
        hash_key, fly, _, tpm = self._keys(name, now_ms)
        args = [
            lease,
            "1" if result.ok else "0",
            "" if result.ttft is None else repr(result.ttft),
            "" if result.gap is None else repr(result.gap),
            result.tokens,
            EWMA_ALPHA,
            STATE_TTL_MS,
            now_ms,
        ]
        try:
            await bounded(self._finish(keys=[hash_key, fly, tpm], args=args), self.timeout)
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("finish", exc)
            await self.local.finish(pool, name, lease, result, now_ms)

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
        retry = -1 if retry_after_ms is None else retry_after_ms
        args: list[str | int] = [
            now_ms,
            retry,
            backoff.base_ms,
            backoff.cap_ms,
            RETRY_AFTER_CAP_MS,
            STATE_TTL_MS,
            reason or "",
            threshold.failures,
            threshold.window_ms,
        ]
        try:
            ms = int(await bounded(self._cool(keys=[self._keys(name, now_ms)[0]], args=args), self.timeout))
            return None if ms < 0 else ms
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("cool", exc)
            return await self.local.cool(pool, name, retry_after_ms, now_ms, reason, backoff, threshold)

    async def recover(self, name: str, now_ms: int) -> None:
        try:
            await bounded(self._recover(keys=[self._keys(name, now_ms)[0]], args=[now_ms]), self.timeout)
        except (RedisError, OSError, TimeoutError) as exc:
            self._down("recover", exc)
            await self.local.recover(name, now_ms)

    async def aclose(self) -> None:
        await self.redis.aclose()
