"""The console's health window: a turn observer (like `app.telemetry.metrics.Metrics`) that keeps one bucket per minute
for the last `WINDOW_MINUTES`, per client key: turns by outcome, samples of time to first token and of
overhead (from each settled turn's record, `app.core.settled`), and per provider the turns served, errors,
retries, fallbacks and timeouts. `GET /v1/console/summary` (`app.api.console`) shows a caller the figures of
its own key (every key's when authentication is off).
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from app.core.job import TurnJob, TurnObserver
from app.core.settled import NextStep, SettledTurn

WINDOW_MINUTES = 30
SAMPLES_PER_MINUTE = 1000  # per key; beyond, reservoir sampling keeps the percentiles unbiased


@dataclass
class ProviderCounts:
    turns: int = 0
    errors: int = 0
    retries: int = 0
    fallbacks: int = 0
    timeouts: int = 0

    def add(self, other: "ProviderCounts") -> None:
        self.turns += other.turns
        self.errors += other.errors
        self.retries += other.retries
        self.fallbacks += other.fallbacks
        self.timeouts += other.timeouts


@dataclass
class MinuteStats:
    """One key's turns settled in one minute."""

    outcomes: Counter[str] = field(default_factory=Counter)
    ttft: list[float] = field(default_factory=list)
    overhead: list[float] = field(default_factory=list)
    seen_ttft: int = 0
    seen_overhead: int = 0
    providers: dict[str, ProviderCounts] = field(default_factory=dict)

    def provider(self, name: str) -> ProviderCounts:
        counts = self.providers.get(name)
        if counts is None:
            counts = self.providers[name] = ProviderCounts()
        return counts


def _sample(samples: list[float], seen: int, value: float) -> None:
    """Reservoir sampling: after `seen` values, each is kept with equal probability."""
    if len(samples) < SAMPLES_PER_MINUTE:
        samples.append(value)
    else:
        slot = random.randrange(seen)
        if slot < SAMPLES_PER_MINUTE:
            samples[slot] = value


def percentiles(samples: list[float]) -> dict[str, float | int | None]:
    """Nearest-rank p50/p90/p99 in milliseconds."""
    if not samples:
        return {"count": 0, "p50": None, "p90": None, "p99": None}
    ordered = sorted(samples)

    def rank(p: float) -> float:
        return round(ordered[max(math.ceil(p * len(ordered)) - 1, 0)] * 1000, 2)

    return {"count": len(ordered), "p50": rank(0.5), "p90": rank(0.9), "p99": rank(0.99)}


class HealthWindow(TurnObserver):
    """A turn observer: per-minute buckets of the last `WINDOW_MINUTES`, per client key."""

    def __init__(self, clock: Any = time.time) -> None:
        self.clock = clock
        self._minutes: deque[tuple[int, dict[str | None, MinuteStats]]] = deque(maxlen=WINDOW_MINUTES)

    def _bucket(self, key_id: str | None) -> MinuteStats:
        minute = int(self.clock() // 60)
        if not self._minutes or self._minutes[-1][0] != minute:
            self._minutes.append((minute, {}))
        per_key = self._minutes[-1][1]
        stats = per_key.get(key_id)
        if stats is None:
            stats = per_key[key_id] = MinuteStats()
        return stats

    def turn_finished(self, job: TurnJob, settled: SettledTurn) -> None:
        stats = self._bucket(job.request.api_key_id)
        outcome = settled.outcome
        stats.outcomes[outcome] += 1
        if settled.ttft is not None:
            stats.seen_ttft += 1
            _sample(stats.ttft, stats.seen_ttft, settled.ttft)
        stats.seen_overhead += 1
        _sample(stats.overhead, stats.seen_overhead, settled.overhead)

        provider = settled.message.get("provider")
        if provider:
            served = stats.provider(provider)
            served.turns += 1
            if outcome == "error":
                served.errors += 1
        for attempt in settled.steps:
            counts = stats.provider(attempt.provider)
            if attempt.timeout is not None:
                counts.timeouts += 1
            if attempt.then is NextStep.RETRY:
                counts.retries += 1
            elif attempt.then is NextStep.FALLBACK:
                counts.fallbacks += 1

    def summary(self, key_id: str | None, minutes: int) -> dict[str, Any]:
        """The last `minutes` minutes (oldest first, empty minutes included) of `key_id`'s turns (with
        authentication off every turn has the key id None)."""
        now_minute = int(self.clock() // 60)
        by_minute = {minute: per_key for minute, per_key in self._minutes}
        rows = []
        all_ttft: list[float] = []
        all_overhead: list[float] = []
        providers: dict[str, ProviderCounts] = {}
        outcomes: Counter[str] = Counter()
        for minute in range(now_minute - minutes + 1, now_minute + 1):
            stats = by_minute.get(minute, {}).get(key_id) or MinuteStats()
            all_ttft.extend(stats.ttft)
            all_overhead.extend(stats.overhead)
            outcomes.update(stats.outcomes)
            for name, counts in stats.providers.items():
                providers.setdefault(name, ProviderCounts()).add(counts)
            rows.append(
                {
                    "start": minute * 60_000,
                    "turns": dict(stats.outcomes),
                    "ttftMs": percentiles(stats.ttft),
                    "overheadMs": percentiles(stats.overhead),
                    "providers": {name: vars(counts) for name, counts in sorted(stats.providers.items())},
                }
            )
        return {
            "minutes": rows,
            "turns": dict(outcomes),
            "ttftMs": percentiles(all_ttft),
            "overheadMs": percentiles(all_overhead),
            "providers": {name: vars(counts) for name, counts in sorted(providers.items())},
        }
