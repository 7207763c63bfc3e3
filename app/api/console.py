"""The web console (`GET /console`) and its health summary (`GET /v1/console/summary`).

The console is static files in `app/console/` (HTML, CSS and JavaScript modules; no build step, nothing
loaded from elsewhere), served only when `GATEWAY_CONSOLE` is on (by default only in demo mode), with a
strict Content-Security-Policy: scripts and styles from this origin only, no inline script, no framing.
The page talks to the gateway's own API with the client key the user types in, sent in the
`Authorization` header only.

The health summary comes from `HealthWindow`, a turn observer (like `app.metrics.Metrics`) that keeps one
bucket per minute for the last `WINDOW_MINUTES`, per client key: turns by outcome, samples of time to first
token and of overhead, and per provider the turns served, errors, retries, fallbacks and timeouts. A caller
sees the figures of its own key (every key's when authentication is off).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections import Counter, deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response
from app.dispatch import TurnJob
from app.settings import Settings

STATIC_DIR = Path(__file__).resolve().parent.parent / "console"
WINDOW_MINUTES = 30
SAMPLES_PER_MINUTE = 1000  # per key; beyond, reservoir sampling keeps the percentiles unbiased
_STATIC_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*\.(js|css|html|svg)$")
_CONTENT_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def console_enabled(settings: Settings) -> bool:
    return settings.demo if settings.console is None else settings.console


# ----------------------------------------------------------------------------- health window


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


class HealthWindow:
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

    def turn_started(self, job: TurnJob) -> None:
        pass

    def turn_finished(self, job: TurnJob) -> None:
        turn = job.turn
        stats = self._bucket(job.api_key_id)
        outcome = turn.outcome or "error"
        stats.outcomes[outcome] += 1
        duration = max(time.monotonic() - turn.created_at, 0.0)
        if turn.first_content_at is not None:
            stats.seen_ttft += 1
            _sample(stats.ttft, stats.seen_ttft, max(turn.first_content_at - turn.created_at, 0.0))
        stats.seen_overhead += 1
        _sample(stats.overhead, stats.seen_overhead, max(duration - job.upstream_wait, 0.0))

        provider = turn.message.get("provider")
        if provider:
            served = stats.provider(provider)
            served.turns += 1
            if outcome == "error":
                served.errors += 1
        attempts = job.attempts
        for index, attempt in enumerate(attempts):
            counts = stats.provider(attempt.provider)
            if attempt.timeout is not None:
                counts.timeouts += 1
            if index + 1 < len(attempts):
                following = attempts[index + 1]
                same = (following.provider, following.model) == (attempt.provider, attempt.model)
                if same:
                    counts.retries += 1
                else:
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
            rows.append({
                "start": minute * 60_000,
                "turns": dict(stats.outcomes),
                "ttftMs": percentiles(stats.ttft),
                "overheadMs": percentiles(stats.overhead),
                "providers": {name: vars(counts) for name, counts in sorted(stats.providers.items())},
            })
        return {
            "minutes": rows,
            "turns": dict(outcomes),
            "ttftMs": percentiles(all_ttft),
            "overheadMs": percentiles(all_overhead),
            "providers": {name: vars(counts) for name, counts in sorted(providers.items())},
        }


# ----------------------------------------------------------------------------- routes

router = APIRouter()


def _static(name: str) -> Response:
    if not _STATIC_NAME.match(name):
        raise ApiError(404, "not_found", "no such console file")
    path = STATIC_DIR / name
    if not path.is_file():
        raise ApiError(404, "not_found", "no such console file")
    return Response(path.read_bytes(), media_type=_CONTENT_TYPES[name.rsplit(".", 1)[1]], headers=SECURITY_HEADERS)


@router.get("/console", include_in_schema=False)
@router.get("/console/", include_in_schema=False)
async def console_page() -> Response:
    return _static("index.html")


@router.get("/console/{name}", include_in_schema=False)
async def console_file(name: str) -> Response:
    return _static(name)


@router.get("/v1/console/summary", tags=["operations"], summary="The console's health summary for the caller's key")
async def console_summary(request: Request, minutes: int = Query(default=15, ge=1, le=WINDOW_MINUTES)) -> Response:
    """Turns per minute by outcome, time to first token and overhead percentiles (ms), and per provider the
    turns served, errors, retries, fallbacks and timeouts, for the caller's key (every key's when
    authentication is off); `activeStreams` counts this process's turns in flight."""
    gateway = request.app.state.gateway
    key_id = gateway.keys.identify(authorization(request.headers))
    window: HealthWindow = request.app.state.console_health
    active = len(gateway.jobs) if key_id is None else gateway.streams_per_key.get(key_id, 0)
    body = {
        "now": int(time.time() * 1000),
        "windowMinutes": minutes,
        "activeStreams": active,
        **window.summary(key_id, minutes),
    }
    return json_response(body, headers={"Cache-Control": "no-store"})


def install_console(app: FastAPI, settings: Settings) -> None:
    """When the console is enabled: its routes, and a `HealthWindow` observing the gateway's turns."""
    if not console_enabled(settings):
        return
    window = HealthWindow()
    app.state.console_health = window
    app.include_router(router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: FastAPI):
        async with inner(application) as state:
            application.state.gateway.dispatcher.observers.append(window)
            yield state

    app.router.lifespan_context = lifespan
