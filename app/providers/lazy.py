"""Adapters imported when first needed: a vendor's SDK costs a gateway process hundreds of milliseconds to import
(docs/performance.md, "Start-up"), and a gateway serves turns through one vendor long before it needs another.

An `Adapter` names the module and class of one adapter (the registry's `ADAPTERS`, a cloud's `adapters`) without
importing it. The gateway's providers are `LazyProvider`s: name, api and placement are known from the catalog at
once; the adapter's module, and with it the vendor SDK, is imported off the event loop (`load`, in a thread) when a
turn first plans a route to the provider, or earlier by `warm_up` once the server listens, and the adapter is built
on the event loop then. Everything else is the adapter's own.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, cast

if TYPE_CHECKING:  # at run time nothing of the adapters: the catalog imports the clouds' descriptors
    from app.contract.catalog_entries import ModelInfo
    from app.contract.messages import Context
    from app.contract.request import StreamOptions
    from app.providers.base import Placement, Provider, ProviderError, Translator, Upstream
    from app.providers.config import ProviderConfig

log = logging.getLogger("gateway.providers")

# One adapter import at a time, whatever the thread: two threads importing two adapters that share modules in a
# different order (the Stainless ones import both SDKs' `_models` through `app.seams.stainless`) could otherwise
# each hold a module the other needs, which Python breaks with an ImportError in one of them.
_IMPORTS = threading.RLock()


@dataclass(frozen=True, slots=True)
class Adapter:
    """Where one adapter class is (`module`, `name`); calling it builds one from a provider's config."""

    module: str
    name: str

    def load(self) -> Any:
        """The adapter class, its module (and the vendor SDK it needs) imported on the calling thread."""
        with _IMPORTS:
            return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, config: ProviderConfig) -> Provider:
        return cast("Provider", self.load()(config))


class LazyProvider:
    """A served provider whose adapter is imported and built when it is first needed (see the module's doc)."""

    def __init__(self, adapter: Adapter, api: str, config: ProviderConfig) -> None:
        self.name = config.name
        self.api = api
        self.placement: Placement | None = config.placement
        self.adapter = adapter
        self._config = config
        self._built: Provider | None = None

    @property
    def loaded(self) -> bool:
        return self._built is not None

    @property
    def built(self) -> Provider:
        """The adapter, imported (on this thread, under the import lock, if `load` has not run yet: the gateway
        loads every route's provider first) and built on first use."""
        if self._built is None:
            self._built = self.adapter(self._config)
        return self._built

    @property
    def base_url(self) -> str | None:
        """The adapter's base URL, where it has one (tracing's `server.address`); None before it is built."""
        return getattr(self._built, "base_url", None)

    async def load(self) -> Provider:
        """The adapter, its module imported in a worker thread so that the event loop keeps serving meanwhile (two
        loads of one module at once: Python's import lock makes the second wait for the first), built here from
        the class that thread found. Not through `built`: that takes the import lock (`Adapter.load`) on the event
        loop's thread, which another thread may hold for seconds importing another SDK (the warm-up, or a turn's
        first load of another provider); every turn of the gateway would wait that long."""
        if self._built is None:
            adapter_class = await asyncio.to_thread(self.adapter.load)
            if self._built is None:  # not built by another load while this one imported
                self._built = cast("Provider", adapter_class(self._config))
        return self._built

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        self.built.check_request(model, context, options)

    def translator(self, model: ModelInfo) -> Translator:
        return self.built.translator(model)

    def error(self, exc: BaseException) -> ProviderError | None:
        return self.built.error(exc)

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        return await (await self.load()).open(model, context, options)

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        return await (await self.load()).count_tokens(model, context, options)

    async def aclose(self) -> None:
        if self._built is not None:
            await self._built.aclose()


class AdapterLoads:
    """The gateway's adapter loads: a turn's (`for_turn`) and the warm-up's (`warm_up`), one import at a time
    (`Adapter.load`'s lock). The warm-up starts its next import only when no turn is waiting for one of its own:
    a turn that needs an adapter while the warm-up imports another vendor's SDK waits for that one import to end
    (an import cannot be stopped halfway), never for the rest of the warm-up. Without this the order between a
    waiting turn's import thread and the warm-up's next one is the threads' race for the lock."""

    def __init__(self) -> None:
        self._turns_loading = 0
        self._no_turn_loading = asyncio.Event()
        self._no_turn_loading.set()

    async def for_turn(self, providers: Iterable[object]) -> None:
        """Load every lazy provider among `providers` that is not loaded yet (a turn's routes, before its checks)."""
        pending = [p for p in providers if isinstance(p, LazyProvider) and not p.loaded]
        if not pending:
            return
        self._turns_loading += 1
        self._no_turn_loading.clear()
        try:
            for provider in pending:
                await provider.load()
        finally:
            self._turns_loading -= 1
            if not self._turns_loading:
                self._no_turn_loading.set()

    async def warm_up(self, providers: Iterable[object]) -> None:
        """Load the adapters of `providers` one after the other, in the background once the server listens, so
        that the first turn through each rarely waits for its import; before each, the turns' own loads go first.
        A failure is logged; the turn that needs the adapter will meet it again."""
        for provider in providers:
            await self._no_turn_loading.wait()
            if isinstance(provider, LazyProvider) and not provider.loaded:
                try:
                    await provider.load()
                except Exception:
                    log.exception("provider %s: loading its adapter failed", provider.name)
