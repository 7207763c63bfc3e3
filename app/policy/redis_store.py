"""The shared limit store: per-key counters in Redis (`GATEWAY_REDIS_URL`), one Lua script per step.

Each step is one script, which Redis runs atomically, so two replicas admitting at the same moment can never
both take the last slot. Keys (all under `GATEWAY_REDIS_PREFIX`, default `gw`):

- `<p>:rpm:<key name>`: sorted set of admitted request ids scored by time (sliding 60 s window);
- `<p>:conc:<key name>`: sorted set of the holds of the key's turns in flight (keys with a concurrency limit or
  a budget), scored by their expiry (renewed while the turn runs);
- `<p>:resv:<key name>`: hash of the turns in flight's reservations, request id → "<USD> <day> <month>" (the
  estimate each reserved and the periods it counts in); a reservation without its hold is stale and dropped;
- `<p>:tpm:<key name>:<minute>`: tokens settled in that minute (expires after two minutes);
- `<p>:spend:<key name>:d:<YYYY-MM-DD>` and `…:m:<YYYY-MM>`: USD spent by turns started in that UTC day /
  month (expire two days / 32 days after the period began). Missing = not seeded: rebuilt from the ledger.
- `<p>:lastcost:<key name>`: USD cost of the key's latest charged turn (the budget's estimate of the next
  one; rebuilt from the ledger with the spend).
- `<p>:void:<request id>`: an admission the gateway gave up on; a late run of its script takes nothing.
- `<p>:settled:<request id>`: a turn already charged (a retried settle charges it once).

The client (`app.redis_client.redis_client`) waits for a free connection of its pool (at most the timeout)
when a burst has them all in use: a busy pool is not a Redis that is down.

Times come from the replicas' clocks (epoch ms), so replicas need synchronised clocks (NTP), as the ledger's
timestamps already do.
"""

from __future__ import annotations

from redis.asyncio import Redis

from app.policy.keys import KeyPolicy
from app.contract.limit_kinds import LimitKind
from app.policy.store import ADMITTED, IN_FLIGHT_RETRY_MS, NEED_SEED, VOID, LimitStore, Periods, Verdict

# KEYS: rpm, conc, tpm (this minute), spend month, spend day, the key's last turn cost, reservations, void
# ARGV: now, rpm limit, concurrency limit, tpm limit, month budget, day budget, request id, lease ttl ms,
#       next minute ms, next day ms, next month ms, day, month, Retry-After ms of a refusal for turns in flight
# The budget rule is `app.policy.store.budget_verdict`.
_ADMIT = """
local now = tonumber(ARGV[1])
local id = ARGV[7]
if redis.call('EXISTS', KEYS[8]) == 1 then return {'void', '0'} end
if redis.call('ZSCORE', KEYS[2], id) or redis.call('ZSCORE', KEYS[1], id) then return {'ok', '0'} end
local month_budget, day_budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local budgeted = month_budget > 0 or day_budget > 0
local estimate = '0'
if budgeted then
  local budgets = {{KEYS[4], month_budget, tonumber(ARGV[11]), ARGV[13]}, {KEYS[5], day_budget, tonumber(ARGV[10]), ARGV[12]}}
  for _, b in ipairs(budgets) do
    if b[2] > 0 and redis.call('EXISTS', b[1]) == 0 then return {'seed', '0'} end
  end
  estimate = redis.call('GET', KEYS[6]) or '0'
  local est = tonumber(estimate)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local reserved = {0, 0}
  local flying = {0, 0}
  local held = redis.call('HGETALL', KEYS[7])
  for i = 1, #held, 2 do
    if redis.call('ZSCORE', KEYS[2], held[i]) then
      local usd, day, month = string.match(held[i + 1], '^(%S+) (%S+) (%S+)$')
      for n, b in ipairs(budgets) do
        local period = (n == 1) and month or day
        if period == b[4] then
          reserved[n] = reserved[n] + tonumber(usd)
          flying[n] = flying[n] + 1
        end
      end
    else
      redis.call('HDEL', KEYS[7], held[i])
    end
  end
  local spent_until = nil
  local in_flight = false
  for n, b in ipairs(budgets) do
    if b[2] > 0 then
      local spent = tonumber(redis.call('GET', b[1]))
      local state = 'ok'
      if spent >= b[2] then
        state = 'spent'
      elseif flying[n] > 0 and (est <= 0 or spent + reserved[n] + est > b[2]) then
        state = 'in_flight'
      elseif flying[n] == 0 and spent > 0 and spent + est > b[2] then
        state = 'spent'
      end
      if state == 'spent' and not spent_until then spent_until = b[3] end
      if state == 'in_flight' then in_flight = true end
    end
  end
  if spent_until then return {'budget_exceeded', tostring(spent_until - now)} end
  if in_flight then return {'budget_in_flight', ARGV[14]} end
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
end
if conc > 0 or budgeted then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[8]), id)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[8]) * 2)
end
if budgeted then
  redis.call('HSET', KEYS[7], id, estimate .. ' ' .. ARGV[12] .. ' ' .. ARGV[13])
  redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[8]) * 2)
end
if rpm > 0 then
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('PEXPIRE', KEYS[1], 60000)
end
return {'ok', '0'}
"""

# KEYS: tpm (settle minute), spend day, spend month, last turn cost, conc, reservations, settled marker
# ARGV: tokens, cost, last cost ttl ms, request id, marker ttl ms
_SETTLE = """
local tokens = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
if (tokens > 0 or cost > 0) and redis.call('SET', KEYS[7], '1', 'NX', 'PX', tonumber(ARGV[5])) then
  if tokens > 0 then
    redis.call('INCRBY', KEYS[1], tokens)
    redis.call('PEXPIRE', KEYS[1], 120000)
  end
  if cost > 0 then
    redis.call('SET', KEYS[4], ARGV[2], 'PX', tonumber(ARGV[3]))
    for i = 2, 3 do
      if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBYFLOAT', KEYS[i], ARGV[2]) end
    end
  end
end
redis.call('ZREM', KEYS[5], ARGV[4])
redis.call('HDEL', KEYS[6], ARGV[4])
return 1
"""

# KEYS: rpm, conc, reservations, void; ARGV: request id, void ttl ms
_ABANDON = """
redis.call('SET', KEYS[4], '1', 'PX', tonumber(ARGV[2]))
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""

# KEYS: conc and reservations of each lease, in pairs; ARGV: new expiry, ttl, then the lease ids in pair order
_RENEW = """
for i = 1, #KEYS, 2 do
  local lease = ARGV[(i + 1) / 2 + 2]
  redis.call('ZADD', KEYS[i], 'XX', ARGV[1], lease)
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2]) * 2)
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then redis.call('PEXPIRE', KEYS[i + 1], tonumber(ARGV[2]) * 2) end
end
return 1
"""

DAY_TTL_MS = 2 * 86_400_000
MONTH_TTL_MS = 32 * 86_400_000


def _decimal(value: float) -> str:
    """A USD amount as plain decimal text (Redis INCRBYFLOAT and Lua read it alike)."""
    return f"{float(value):.12f}"


class RedisLimitStore(LimitStore):
    POOL_SIZE = 64  # connections of the limits' client; a burst beyond it waits for one (bounded by the timeout)

    def __init__(self, client: Redis, prefix: str = "gw") -> None:
        self.redis = client
        self.prefix = prefix
        self._admit = client.register_script(_ADMIT)
        self._settle = client.register_script(_SETTLE)
        self._abandon = client.register_script(_ABANDON)
        self._renew = client.register_script(_RENEW)

    def _key(self, kind: str, name: str, *suffix: object) -> str:
        return ":".join([self.prefix, kind, name, *map(str, suffix)])

    def _spend_keys(self, name: str, periods: Periods) -> tuple[str, str]:
        return self._key("spend", name, "d", periods.day), self._key("spend", name, "m", periods.month)

    async def admit(self, name: str, policy: KeyPolicy, lease: str, periods: Periods, lease_ttl_ms: int) -> Verdict:
        day_key, month_key = self._spend_keys(name, periods)
        keys = [
            self._key("rpm", name),
            self._key("conc", name),
            self._key("tpm", name, periods.minute),
            month_key,
            day_key,
            self._key("lastcost", name),
            self._key("resv", name),
            self._key("void", lease),
        ]
        args: list[str | int | float] = [
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
            periods.day,
            periods.month,
            IN_FLIGHT_RETRY_MS,
        ]
        kind, retry_after = await self._admit(keys=keys, args=args)
        if kind == "ok":
            return ADMITTED
        if kind == "seed":
            return NEED_SEED
        if kind == "void":
            return VOID
        return Verdict(LimitKind(kind), int(float(retry_after)))

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

    async def settle(
        self, name: str, lease: str, tokens: int, settled: Periods, cost: float, started: Periods, marker_ttl_ms: int
    ) -> None:
        day_key, month_key = self._spend_keys(name, started)
        keys = [
            self._key("tpm", name, settled.minute),
            day_key,
            month_key,
            self._key("lastcost", name),
            self._key("conc", name),
            self._key("resv", name),
            self._key("settled", name, lease),  # per subject: a turn charges its key, team and end user once each
        ]
        await self._settle(keys=keys, args=[tokens, _decimal(cost), MONTH_TTL_MS, lease, marker_ttl_ms])

    async def spent(self, name: str, periods: Periods) -> tuple[float, float]:
        day, month = await self.redis.mget(self._spend_keys(name, periods))
        return float(day or 0), float(month or 0)

    async def claim(self, marker: str, ttl_ms: int) -> bool:
        return bool(await self.redis.set(self._key("claim", marker), 1, nx=True, px=ttl_ms))

    async def abandon(self, name: str, lease: str, now_ms: int, void_ttl_ms: int) -> None:
        keys = [self._key("rpm", name), self._key("conc", name), self._key("resv", name), self._key("void", lease)]
        await self._abandon(keys=keys, args=[lease, void_ttl_ms])

    async def renew(self, leases: list[tuple[str, str]], now_ms: int, lease_ttl_ms: int) -> None:
        keys = [key for name, _ in leases for key in (self._key("conc", name), self._key("resv", name))]
        await self._renew(keys=keys, args=[now_ms + lease_ttl_ms, lease_ttl_ms, *(lease for _, lease in leases)])

    async def aclose(self) -> None:
        await self.redis.aclose()
