"""A scripted Provider for testing the dispatcher (and what sits on it) without a vendor or an SDK.

Each `open()` plays the next script of `FakeProvider.scripts`: a list of steps, where a step is

- a list of adapter events (one wire frame, passed through the translator unchanged),
- a `ProviderError` (raised by `open()` when it is the script's first step, else mid-stream),
- `Gate(event)`: the upstream waits until the test sets `event` (a vendor that is silent until then),
- `HANG`: the upstream never sends anything again.

A script that runs out without a `finish` event ends the body: the translator reports it truncated, as real
adapters do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.core.job import Route, TurnJob, TurnRequest
from app.providers.base import Placement, ProviderError, Upstream
from app.stream.turn import Turn

HANG = object()


@dataclass
class Gate:
    event: asyncio.Event


class FakeTranslator:
    def __init__(self) -> None:
        self.finished = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    def feed(self, wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if any(event["type"] == "finish" for event in wire):
            self.finished = True
        return wire

    def end(self) -> list[dict[str, Any]]:
        if not self.finished:
            raise ProviderError("stream ended before its terminal event (truncated)", kind="truncated")
        return []


@dataclass
class FakeProvider:
    name: str = "fake"
    api: str = "fake-api"
    placement: Placement | None = None  # at the api's maker
    scripts: list[list[Any]] = field(default_factory=list)
    opened: int = 0
    closed: int = 0

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        script = list(self.scripts[self.opened]) if self.opened < len(self.scripts) else []
        self.opened += 1
        if script and isinstance(script[0], ProviderError):
            raise script[0]

        async def frames():
            for step in script:
                if isinstance(step, ProviderError):
                    raise step
                if step is HANG:
                    await asyncio.Event().wait()
                if isinstance(step, Gate):
                    await step.event.wait()
                    continue
                yield step

        async def close() -> None:
            self.closed += 1

        return Upstream(frames(), close)

    def translator(self, model: ModelInfo) -> FakeTranslator:
        return FakeTranslator()

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        pass

    def error(self, exc: BaseException) -> ProviderError | None:
        return None

    async def aclose(self) -> None:
        pass


def text_frames(*chunks: str, reason: str = "stop") -> list[list[dict[str, Any]]]:
    """A whole text reply as frames: block start, one delta per chunk, block end, finish."""
    return [
        [{"type": "text_start"}],
        *[[{"type": "text_delta", "delta": chunk}] for chunk in chunks],
        [{"type": "text_end"}, {"type": "finish", "reason": reason}],
    ]


def new_job(*providers: FakeProvider, model: str = "m", throttle_ms: int = 0, **turn_options: Any) -> TurnJob:
    """A job over `providers` (the first is the requested route, the rest its fallbacks)."""
    turn = Turn("req_fake", throttle_ms=throttle_ms, **turn_options)
    routes = tuple(Route(p, ModelInfo(p.name, model, Pricing())) for p in providers)
    context = Context.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    request = TurnRequest(routes, context, StreamOptions(), requested_model=f"{providers[0].name}/{model}")
    return TurnJob(turn, request)
