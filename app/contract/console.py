"""`GET /v1/console/pools`: the console's view of each pool (CONTRACT §9b, docs/pools.md) — its strategy, and
per deployment what the balancer knows of it now: turns in flight, cooldown, latency estimates, quota use.
With Redis the figures are every replica's (`shared`); without it, this process's."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Cooldown(BaseModel):
    cooling: bool = Field(description="skipped now: its cooldown has not ended")
    until: int | None = Field(description="epoch ms its cooldown ends (ended: the last one's end; null: never cooled)")
    reason: str | None = Field(
        description="why it was last cooled: rate_limited, server_error, connect, first_event_timeout"
    )
    streak: int = Field(description="failures in a row (each doubles the next backoff; a success resets it)")


class QuotaUse(BaseModel):
    used: int = Field(description="requests of the last 60 s (rpm) or tokens of this minute (tpm)")
    limit: int | None = Field(description="the deployment's quota; null: none")


class PoolDeploymentView(BaseModel):
    name: str = Field(description="the deployment's name in records, metrics and Redis keys")
    provider: str
    model: str = Field(description="the vendor's model id at that provider")
    weight: float
    configured: bool = Field(description="its provider is configured (has a key); otherwise it is never sent a turn")
    inFlight: int = Field(description="attempts in flight (every replica's with Redis)")
    cooldown: Cooldown
    ttftMs: float | None = Field(description="EWMA of the time to first token, ms; null before the first sample")
    gapMs: float | None = Field(description="EWMA of the gap between frames after the first token, ms")
    sampledAt: int | None = Field(description="epoch ms of the latest latency sample")
    rpm: QuotaUse
    tpm: QuotaUse


class PoolView(BaseModel):
    name: str = Field(description="the route's name (the model clients send)")
    strategy: str = Field(description="weighted, least-in-flight, lowest-latency or cost")
    shared: bool = Field(
        description="this state was read from Redis, shared by every replica (false: this process's own)"
    )
    deployments: list[PoolDeploymentView]


class ConsolePools(BaseModel):
    now: int = Field(description="epoch ms")
    pools: list[PoolView]
