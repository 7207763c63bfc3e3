"""The running gateway: settings, catalog, configured providers, the dispatcher and the turns in flight."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable

from app.api.auth import KeyRing
from app.api.errors import ApiError
from app.catalog import Catalog
from app.contract.request import StreamRequest
from app.dispatch import Dispatcher, Interrupt, TurnJob, UnknownModel
from app.providers.base import Provider
from app.providers.registry import build_providers
from app.settings import Settings
from app.stream.turn import Turn

log = logging.getLogger("gateway")


class Gateway:
    def __init__(self, settings: Settings, providers: dict[str, Provider] | None = None) -> None:
        self.settings = settings
        self.catalog = Catalog.load(settings.catalog)
        self.keys = KeyRing(settings.api_keys.get_secret_value())
        self.dispatcher = Dispatcher(
            providers if providers is not None else build_providers(settings, self.catalog), self.catalog, settings
        )
        self.jobs: set[TurnJob] = set()
        self.draining = False
        self.started_at = time.time()

    def start_turn(self, request: StreamRequest, request_id: str, key_id: str | None) -> TurnJob:
        """Resolve the model and its fallbacks, then start the turn's pump in the background."""
        routes = []
        for index, ref in enumerate([request.model, *request.fallback]):
            try:
                routes.append(self.dispatcher.route(ref))
            except UnknownModel:
                param = "model" if index == 0 else f"fallback.{index - 1}"
                provider = ref.partition("/")[0]
                reason = (
                    f"provider '{provider}' is not configured on this gateway"
                    if provider in self.catalog.providers
                    else f"unknown provider '{provider}'"
                )
                raise ApiError(404, "model_not_found", f"{ref}: {reason}", param=param) from None
        options = request.options
        throttle = self.settings.throttle_ms if options.throttle_ms is None else options.throttle_ms
        turn = Turn(request_id, throttle_ms=throttle, max_pending_bytes=self.settings.max_pending_bytes)
        job = TurnJob(
            turn=turn,
            routes=routes,
            context=request.context,
            options=options,
            api_key_id=key_id,
            requested_model=request.model,
            fallback=list(request.fallback),
        )
        job.task = asyncio.create_task(self.dispatcher.run(job), name=f"turn-{request_id}")
        self.jobs.add(job)
        job.task.add_done_callback(lambda _: self.jobs.discard(job))
        return job

    async def drain(self, timeout: float) -> None:
        """Stop taking turns, let those in flight finish for up to `timeout`, then settle the rest."""
        self.draining = True
        pending = [job.task for job in self.jobs if job.task is not None]
        if pending:
            _, still_running = await asyncio.wait(pending, timeout=timeout)
            for job in list(self.jobs):
                job.interrupt(Interrupt.SHUTDOWN)
            if still_running:
                await asyncio.wait(still_running, timeout=5)

    async def aclose(self, providers: Iterable[Provider] | None = None) -> None:
        for provider in providers or self.dispatcher.providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
