"""The one way the gateway connects to Redis (`GATEWAY_REDIS_URL`): the limit store
(`app.policy.redis_store`) and the event store of resumable streams (`app.resume`) both get their client here."""

from __future__ import annotations

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff


def redis_client(
    url: str,
    timeout: float,
    decode: bool = True,
    *,
    max_connections: int | None = None,
    pool_timeout: float | None = None,
) -> Redis:
    """An asyncio client whose calls give up after `timeout` seconds. One immediate retry, so a pooled connection
    that a Redis restart closed is replaced instead of failing the call. With `max_connections`, a call that
    finds every connection in use waits for one (at most `pool_timeout`, default `timeout`) instead of failing
    at once."""
    options = dict(
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        decode_responses=decode,
    )
    if max_connections is None:
        return Redis.from_url(url, **options)
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout if pool_timeout is None else pool_timeout, **options
    )
    return Redis.from_pool(pool)
