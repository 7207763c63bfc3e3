"""The shared limit store: per-key counters in Redis (`GATEWAY_REDIS_URL`), one Lua script per step.

Each step is one script, which Redis runs atomically, so two replicas admitting at the same moment can never
both take the last slot. Keys (all under `GATEWAY_REDIS_PREFIX`, default `gw`):

- `<p>:rpm:<key name>`: sorted set of admitted request ids scored by time (sliding 60 s window);
- `<p>:conc:<key name>`: sorted set of concurrency leases scored by their expiry (renewed while the turn runs);
- `<p>:tpm:<key name>:<minute>`: tokens settled in that minute (expires after two minutes);
- `<p>:spend:<key name>:d:<YYYY-MM-DD>` and `…:m:<YYYY-MM>`: USD spent by turns started in that UTC day /
  month (expire two days / 32 days after the period began). Missing = not seeded: rebuilt from the ledger.
- `<p>:lastcost:<key name>`: USD cost of the key's latest charged turn (the budget's estimate of the next
  one; rebuilt from the ledger with the spend).

Times come from the replicas' clocks (epoch ms), so replicas need synchronised clocks (NTP), as the ledger's
timestamps already do.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from app.keys import KeyPolicy
from app.limits import ADMITTED, NEED_SEED, WINDOW_MS, LimitStore, Periods, Verdict

# KEYS: rpm, conc, tpm (this minute), spend month, spend day, the key's last turn cost
# ARGV: now, rpm limit, concurrency limit, tpm limit, month budget, day budget, lease id, lease ttl ms,
#       next minute ms, next day ms, next month ms
_ADMIT = """
local now = tonumber(ARGV[1])
local budgets = {{KEYS[4], tonumber(ARGV[5]), tonumber(ARGV[11])}, {KEYS[5], tonumber(ARGV[6]), tonumber(ARGV[10])}}
for _, b in ipairs(budgets) do
  if b[2] > 0 then
    local spent = redis.call('GET', b[1])
    if not spent then return {'seed', '0'} end
    local last = tonumber(redis.call('GET', KEYS[6]) or '0')
    if tonumber(spent) >= b[2] or tonumber(spent) + last > b[2] then return {'budget_exceeded', tostring(b[3] - now)} end
  end
end
local tpm = tonumber(ARGV[4])
if tpm > 0 and tonumber(redis.call('GET', KEYS[3]) or '0') >= tpm then
  return {'rate_limit_tpm', tostring(tonumber(ARGV[9]) - now)}
end
local rpm = tonumber(ARGV[2])
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 60000)
  if redis.call('ZCARD', KEYS[1]) >= rpm then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {'rate_limit_rpm', tostring(tonumber(oldest[2]) + 60000 - now)}
  end
end
local conc = tonumber(ARGV[3])
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= conc then return {'concurrency_limit', '1000'} end
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[8]), ARGV[7])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[8]) * 2)
end
if rpm > 0 then
  redis.call('ZADD', KEYS[1], now, ARGV[7])
  redis.call('PEXPIRE', KEYS[1], 60000)
end
return {'ok', '0'}
"""

# KEYS: tpm (settle minute), spend day, spend month, last turn cost; ARGV: tokens, cost, last cost ttl ms
_CHARGE = """
local tokens = tonumber(ARGV[1])
if tokens > 0 then
  redis.call('INCRBY', KEYS[1], tokens)
  redis.call('PEXPIRE', KEYS[1], 120000)
end
local cost = tonumber(ARGV[2])
if cost > 0 then
  redis.call('SET', KEYS[4], ARGV[2], 'PX', tonumber(ARGV[3]))
  for i = 2, 3 do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBYFLOAT', KEYS[i], ARGV[2]) end
  end
end
return 1
"""

# KEYS: conc sets (one per lease); ARGV: new expiry, ttl, then the lease ids in KEYS order
_RENEW = """
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', ARGV[1], ARGV[i + 2])
  redis.call('PEXPIRE', key, tonumber(ARGV[2]) * 2)
end
return 1
"""

DAY_TTL_MS = 2 * 86_400_000
MONTH_TTL_MS = 32 * 86_400_000


def _decimal(value: float) -> str:
    """A USD amount as plain decimal text (Redis INCRBYFLOAT and Lua read it alike)."""
    return f"{float(value):.12f}"


def redis_client(url: str, timeout: float, decode: bool = True) -> Redis:
    """An asyncio client whose calls give up after `timeout` seconds. One immediate retry, so a pooled connection
    that a Redis restart closed is replaced instead of failing the call."""
    return Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        decode_responses=decode,
    )


class RedisLimitStore(LimitStore):
    def __init__(self, client: Redis, prefix: str = "gw") -> None:
        self.redis = client
        self.prefix = prefix
        self._admit = client.register_script(_ADMIT)
        self._charge = client.register_script(_CHARGE)
        self._renew = client.register_script(_RENEW)

    def _key(self, kind: str, name: str, *suffix: object) -> str:
        return ":".join([self.prefix, kind, name, *map(str, suffix)])

    def _spend_keys(self, name: str, periods: Periods) -> tuple[str, str]:
        return self._key("spend", name, "d", periods.day), self._key("spend", name, "m", periods.month)

    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        day_key, month_key = self._spend_keys(name, periods)
        keys = [
            self._key("rpm", name), self._key("conc", name), self._key("tpm", name, periods.minute), month_key, day_key,
            self._key("lastcost", name),
        ]
        args = [
            periods.now_ms,
            policy.requests_per_minute,
            policy.concurrent_streams,
            policy.tokens_per_minute,
            _decimal(policy.budget_usd_per_month),
            _decimal(policy.budget_usd_per_day),
            lease,
            lease_ttl_ms,
            periods.next_minute_ms,
            periods.next_day_ms,
            periods.next_month_ms,
        ]
        kind, retry_after = await self._admit(keys=keys, args=args)
        if kind == "ok":
            return ADMITTED
        if kind == "seed":
            return NEED_SEED
        return Verdict(kind, int(float(retry_after)))

    async def seed_spend(
        self, name: str, periods: Periods, day_spend: float, month_spend: float, last_cost: float = 0.0
    ) -> None:
        day_key, month_key = self._spend_keys(name, periods)
        day_ttl = periods.day_start_ms + DAY_TTL_MS - periods.now_ms
        month_ttl = periods.month_start_ms + MONTH_TTL_MS - periods.now_ms
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(day_key, _decimal(day_spend), nx=True, px=day_ttl)
            pipe.set(month_key, _decimal(month_spend), nx=True, px=month_ttl)
            pipe.set(self._key("lastcost", name), _decimal(last_cost), nx=True, px=MONTH_TTL_MS)
            await pipe.execute()

    async def charge(self, name: str, tokens: int, settled: Periods, cost: float, started: Periods) -> None:
        day_key, month_key = self._spend_keys(name, started)
        keys = [self._key("tpm", name, settled.minute), day_key, month_key, self._key("lastcost", name)]
        await self._charge(keys=keys, args=[tokens, _decimal(cost), MONTH_TTL_MS])

    async def release(self, name: str, lease: str) -> None:
        await self.redis.zrem(self._key("conc", name), lease)

    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None:
        keys = [self._key("conc", name) for name, _ in leases]
        await self._renew(keys=keys, args=[now_ms + lease_ttl_ms, lease_ttl_ms, *(lease for _, lease in leases)])

    async def aclose(self) -> None:
        await self.redis.aclose()


__all__ = ["RedisLimitStore", "redis_client", "WINDOW_MS"]
