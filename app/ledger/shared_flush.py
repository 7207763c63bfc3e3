"""Read-your-writes across processes: a records read waits until every gateway process sharing the Redis
(`GATEWAY_REDIS_URL`: the workers of `GATEWAY_WORKERS`, and replicas) has written the record writes it had queued.

Each process writes its records from an in-memory queue (`app.ledger.LedgerObserver`), so a client whose turn
finished on one worker and who reads its record through another (a new connection lands on either) could find it
missing or still open. `SharedFlush.everywhere` publishes a flush request on `<prefix>:ledger:flush`; every
process subscribed there (`run`, one per process) flushes its own queue and then pushes an acknowledgement to
`<prefix>:ledger:flushed:<token>`. PUBLISH answers how many subscribers received the request, so the reader
waits for exactly that many acknowledgements (bounded by its timeout). A process whose subscription is down
(Redis restarting) is not counted; the reader flushes its own queue in any case.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Awaitable, Callable

from app.redis_client import raise_dropped_cancellation, redis_client

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("gateway.ledger")

ACK_TTL_S = 30  # an acknowledgement list nobody reads (the reader timed out) expires
POLL_S = 1.0  # how long the subscriber waits for a message before looking again (and noticing cancellation)
RETRY_S = 1.0  # after the subscription failed (Redis away), before subscribing again


class SharedFlush:
    """`everywhere(timeout)`: every subscribed process has flushed its queued record writes; `run()`: this
    process's subscription, answering the others' requests with `flush_local`."""

    def __init__(self, url: str, prefix: str, timeout: float, flush_local: Callable[[float], Awaitable[bool]]) -> None:
        # A socket timeout above the blocking calls' own (`POLL_S`, and BLPOP up to the reader's timeout).
        self.redis: Redis = redis_client(url, timeout + POLL_S + 1.0)
        self.channel = f"{prefix}:ledger:flush"
        self.acks = f"{prefix}:ledger:flushed:"
        self.timeout = timeout  # `GATEWAY_REDIS_TIMEOUT`: the bound of the request itself (PUBLISH)
        self.flush_local = flush_local
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="gateway-ledger-shared-flush")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.redis.aclose()

    async def everywhere(self, timeout: float) -> bool:
        """Ask every subscribed process to flush and wait for their answers; False when some did not answer
        within `timeout` or Redis did not (this process's own queue is flushed either way)."""
        deadline = time.monotonic() + timeout
        local = await self.flush_local(timeout)
        token = uuid.uuid4().hex
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                async with asyncio.timeout(self.timeout):  # a silent Redis costs a read this much, not `timeout`
                    receivers = await self.redis.publish(self.channel, token)
                for _ in range(receivers):
                    left = deadline - time.monotonic()
                    if left <= 0 or await self.redis.blpop([self.acks + token], timeout=left) is None:
                        return False
        except (TimeoutError, asyncio.TimeoutError):
            return False
        except Exception as exc:  # Redis away: the reader goes on with its own writes flushed
            log.debug("ledger: shared flush failed (%s)", type(exc).__name__)
            return False
        finally:
            raise_dropped_cancellation()
        return local

    async def run(self) -> None:
        """Subscribe and answer flush requests until cancelled; subscribe again after Redis failed."""
        while True:
            try:
                await self._serve()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("ledger: shared flush subscription failed (%s); retrying", type(exc).__name__)
            await asyncio.sleep(RETRY_S)

    async def _serve(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            while True:
                message = await pubsub.get_message(timeout=POLL_S)
                raise_dropped_cancellation()
                if message is not None and message.get("type") == "message":
                    token = message["data"]
                    await self.flush_local(POLL_S)
                    async with self.redis.pipeline(transaction=False) as pipe:
                        pipe.rpush(self.acks + token, "1")
                        pipe.expire(self.acks + token, ACK_TTL_S)
                        await pipe.execute()
        finally:
            await pubsub.aclose()
