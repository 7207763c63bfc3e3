"""Run the real dispatcher and event stream over a scripted list of wire events, without a network.

Used by the property-based tests: a `ScriptedProvider` hands the dispatcher an `Upstream` that yields the
given wire events (and can raise a transport error at the end), with a real adapter's Translator. Everything
after that — attempts, settlement, the Turn, coalescing — is the production code.
"""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any, Callable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from app.catalog import Catalog
from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context, UserMessage
from app.contract.request import StreamOptions
from app.core.dispatcher import Dispatcher
from app.core.job import Route, TurnJob, TurnRequest
from app.providers.base import Placement, ProviderError, Upstream
from app.settings import Settings
from app.stream.turn import Turn
from tests.conformance import check_events
from tests.conftest import examples


class ScriptedProvider:
    placement: Placement | None = None  # at the api's maker (a test may place it on a cloud)

    def __init__(
        self,
        name: str,
        api: str,
        translator: Callable[[], Any],
        wire: list[Any],
        fail_with: BaseException | None = None,
    ):
        self.name = name
        self.api = api
        self._translator = translator
        self.wire = wire
        self.fail_with = fail_with
        self.closed = False

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        async def events():
            for item in self.wire:
                yield item
            if self.fail_with is not None:
                raise self.fail_with

        async def close() -> None:
            self.closed = True

        return Upstream(events(), close)

    def translator(self, model: ModelInfo) -> Any:
        return self._translator()

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        pass

    def error(self, exc: BaseException) -> ProviderError | None:
        return ProviderError(f"connection lost: {exc}", retryable=True) if isinstance(exc, ConnectionError) else None

    async def aclose(self) -> None:
        pass


def run_script(provider: ScriptedProvider, *, throttle_ms: int = 0) -> tuple[list[dict[str, Any]], TurnJob]:
    """Drive one turn over the script; returns the events a reader would see, and the job."""
    settings = Settings(retries=0, late_frame_grace=0.5, first_event_timeout=5, idle_timeout=5, total_timeout=30)

    async def main() -> tuple[list[dict[str, Any]], TurnJob]:
        dispatcher = Dispatcher({provider.name: provider}, Catalog(), settings)  # type: ignore[arg-type]
        turn = Turn("req_fuzz", throttle_ms=throttle_ms)
        request = TurnRequest(
            routes=(Route(provider, ModelInfo(provider.name, "fuzz-model", Pricing(1, 1, 1, 1))),),  # type: ignore[arg-type]
            context=Context(messages=[UserMessage(content="hi")]),
            options=StreamOptions(),
            requested_model=f"{provider.name}/fuzz-model",
        )
        job = TurnJob(turn, request)
        task = dispatcher.start(job)
        events = []
        while (event := await turn.next_event()) is not None:
            events.append(event)
        await task
        return events, job

    return asyncio.run(main())


GENERIC_MUTATIONS = ["drop", "duplicate", "swap", "truncate", "transport", "retype"]
# Values of a type or size no vendor sends where they land: a list or dict for an index, a number for a text,
# counts past 64 bits or past any float, text for a number (issue 24 item 12: never an internal error).
HOSTILE_VALUES = ([0], {"i": 0}, 5, -1, 10**20, 10**400, float("inf"), float("nan"), 1.5, "7", True, None, "")


def corrupt(wire: list[Any], mutation: str, seed: int) -> tuple[list[Any], BaseException | None, int]:
    """Apply one vendor-neutral corruption to a wire script at a position picked by `seed`.

    Returns the new script, the transport error the upstream should raise at its end (or None), and the
    position, so that a caller can insert its vendor's own odd frames there for the other mutations."""
    wire = list(wire)
    at = seed % len(wire)
    fail_with: BaseException | None = None
    if mutation == "drop":
        del wire[at]
    elif mutation == "duplicate":
        wire.insert(at, wire[at])
    elif mutation == "swap" and at + 1 < len(wire):
        wire[at], wire[at + 1] = wire[at + 1], wire[at]
    elif mutation == "truncate":
        wire = wire[:at]
    elif mutation == "transport":
        wire = wire[:at]
        fail_with = ConnectionError("reset by peer")
    elif mutation == "retype":
        wire[at] = retyped(wire[at], seed)
    return wire, fail_with, at


def retyped(event: Any, seed: int) -> Any:
    """A copy of a wire event with one value (picked by `seed`, at any depth) replaced by a hostile one."""
    event = copy.deepcopy(event)
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            slots.append((node, key))
            walk(value)

    walk(event)
    if slots:
        node, key = slots[seed % len(slots)]
        node[key] = HOSTILE_VALUES[(seed // len(slots)) % len(HOSTILE_VALUES)]
    return event


# ---------------------------------------------------------------- shared pieces of the property-based tests

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))  # the soak raises it; `make test` runs the defaults
VALID_EXAMPLES = EXAMPLES or examples(400)
CORRUPT_EXAMPLES = EXAMPLES or examples(1200)
fuzz_valid = settings(max_examples=VALID_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
fuzz_corrupt = settings(max_examples=CORRUPT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_corrupted(provider: ScriptedProvider, *, throttle_ms: int) -> tuple[dict[str, Any], TurnJob]:
    """Run a corrupted script: every invariant of the checker holds, and an `error` names the provider and
    model and is never an internal error. Returns the terminal event and the job."""
    events, job = run_script(provider, throttle_ms=throttle_ms)
    check_events(events)
    terminal = events[-1]
    if terminal["type"] == "error":
        assert terminal["errorMessage"].startswith(f"{provider.name}/fuzz-model ")
        assert "internal error" not in terminal["errorMessage"]
    return terminal, job


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(st.text(max_size=6), json_values, max_size=4)


# Text as vendors stream it: any character, emoji (two UTF-16 units) and lone surrogate halves included.
EMOJI = ("\U0001f600", "\U0001f914", "\U0001d11e", "\U0001f4bb", "\u200d")
wire_text = st.text(alphabet=st.characters(exclude_categories=()) | st.sampled_from(EMOJI), max_size=12)


def utf16_split(draw: Any, text: str) -> list[str]:
    """Cut `text` at up to 4 drawn points counted in UTF-16 code units, as vendors cut it: a cut inside a
    surrogate pair leaves each half a lone surrogate, which is what the JSON escape `\\ud83d` decodes to."""
    units = text.encode("utf-16-le", "surrogatepass")
    count = len(units) // 2
    cuts = sorted(set(draw(st.lists(st.integers(0, count), max_size=4))))
    points = [0, *cuts, count]
    return [units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass") for a, b in zip(points, points[1:])]


def valid_text(text: str) -> str:
    """What a client must see of streamed `text`: surrogate pairs joined, lone halves dropped. An oracle
    independent of the gateway's code: the UTF-16 codec, ignoring what it cannot decode."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")


def split(draw: Any, text: str) -> list[str]:
    """Cut a string at up to 4 drawn points: how a vendor might fragment streamed JSON."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))))
    points = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(points, points[1:])]
