"""Unit tests of the event stream: settlement, block rules, coalescing, the memory bound."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from app.contract.catalog_entries import Pricing
from app.stream.turn import ContractViolation, ToolArgumentsError, Turn
from tests.conformance import check_events


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def new_turn(**kwargs) -> Turn:
    turn = Turn("req_test", **kwargs)
    turn.prepare("anthropic", "anthropic-messages", "m", Pricing(1, 2, 0.5, 4))
    return turn


def drain(turn: Turn) -> list[dict]:
    """Take every queued event without waiting (the consumer side, run to completion)."""

    return turn.queue.take_now()


def test_first_terminal_outcome_wins_and_later_frames_are_counted():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "hi"})
    turn.apply({"type": "text_end"})
    assert turn.settle_done("stop") is True
    assert turn.settle_error("late failure") is False
    assert turn.settle_error("client gone", aborted=True) is False
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "late"})
    assert turn.late_frames == 2
    events = check_events(drain(turn))
    assert [e["type"] for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert turn.outcome == "done"


async def test_racing_terminal_outcomes_settle_exactly_once():
    turn = new_turn()
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "x"})
    results = []

    async def settle(kind: str) -> None:
        await asyncio.sleep(0)
        if kind == "done":
            results.append(("done", turn.settle_error("upstream said stop but block open")))
        elif kind == "abort":
            results.append(("abort", turn.settle_error("client", aborted=True)))
        else:
            results.append(("error", turn.settle_error("boom")))

    await asyncio.gather(*(settle(k) for k in ["abort", "error", "done"] * 10))
    assert sum(won for _, won in results) == 1
    events = []
    while (event := await turn.next_event()) is not None:
        events.append(event)
    assert sum(e["type"] in ("done", "error") for e in events) == 1
    assert events[-1]["reason"] == "aborted"  # the first settler in the race
    check_events(events)


def test_done_with_a_tool_call_is_tool_use_whatever_the_provider_said():
    turn = new_turn()
    turn.apply({"type": "toolcall_start", "id": "c1", "toolName": "t"})
    turn.apply({"type": "toolcall_delta", "delta": '{"a":'})
    turn.apply({"type": "toolcall_delta", "delta": " 1}"})
    turn.apply({"type": "toolcall_end"})
    turn.settle_done("stop")
    events = check_events(drain(turn))
    assert events[-1]["reason"] == "toolUse"
    assert events[-1]["message"]["content"] == [{"type": "toolCall", "id": "c1", "name": "t", "arguments": {"a": 1}}]


def test_tool_use_without_a_call_is_stop():
    turn = new_turn()
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_end"})
    turn.settle_done("toolUse")
    assert drain(turn)[-1]["reason"] == "stop"


@pytest.mark.parametrize("raw", ['{"a": ', "[1, 2]", '"text"', "{} {}"])
def test_tool_arguments_must_parse_as_one_object(raw):
    turn = new_turn()
    turn.apply({"type": "toolcall_start", "id": "c9", "toolName": "tool"})
    turn.apply({"type": "toolcall_delta", "delta": raw})
    with pytest.raises(ToolArgumentsError, match="c9"):
        turn.apply({"type": "toolcall_end"})
    assert turn.message["content"] == []


def test_interleaved_blocks_are_refused():
    turn = new_turn()
    turn.apply({"type": "text_start"})
    with pytest.raises(ContractViolation):
        turn.apply({"type": "thinking_start"})
    with pytest.raises(ContractViolation):
        turn.apply({"type": "thinking_delta", "delta": "x"})


def test_error_keeps_partial_text_and_drops_incomplete_call():
    turn = new_turn()
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "partial"})
    turn.settle_error("cut")
    assert turn.message["content"] == [{"type": "text", "text": "partial"}]
    turn2 = new_turn()
    turn2.apply({"type": "toolcall_start", "id": "c", "toolName": "t"})
    turn2.apply({"type": "toolcall_delta", "delta": '{"x"'})
    turn2.settle_error("cut")
    assert turn2.message["content"] == []
    check_events(drain(turn))


def test_usage_is_priced_and_summed():
    turn = new_turn()
    turn.apply({"type": "usage", "input": 1000, "output": 500, "cacheRead": 200, "cacheWrite": 100})
    usage = turn.message["usage"]
    assert usage["totalTokens"] == 1800
    assert usage["cost"]["input"] == pytest.approx(1000 * 1 / 1e6)
    assert usage["cost"]["output"] == pytest.approx(500 * 2 / 1e6)
    assert usage["cost"]["cacheRead"] == pytest.approx(200 * 0.5 / 1e6)
    assert usage["cost"]["cacheWrite"] == pytest.approx(100 * 4 / 1e6)
    assert usage["cost"]["total"] == pytest.approx(
        sum(usage["cost"][k] for k in ("input", "output", "cacheRead", "cacheWrite"))
    )


# ---------------------------------------------------------------- coalescing (CONTRACT invariant 10)


async def _take_now(turn: Turn) -> list[dict]:
    """Events the reader can take without waiting for a window to close."""
    events = []
    while turn.queue._ready:
        events.append(await turn.next_event())
    return events


async def test_first_delta_goes_out_at_once_and_the_window_merges_the_rest():
    clock = FakeClock()
    turn = new_turn(throttle_ms=50, clock=clock)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "a"})
    assert [e["type"] for e in await _take_now(turn)] == ["start", "text_start", "text_delta"]
    clock.now += 0.010
    turn.apply({"type": "text_delta", "delta": "b"})
    clock.now += 0.010
    turn.apply({"type": "text_delta", "delta": "c"})
    assert await _take_now(turn) == []  # held until the window closes
    clock.now += 0.031  # past the 50 ms window
    event = await turn.next_event()
    assert event == {"type": "text_delta", "contentIndex": 0, "delta": "bc"}
    # A new window starts when the held delta went out.
    clock.now += 0.060
    turn.apply({"type": "text_delta", "delta": "d"})
    assert [e["delta"] for e in await _take_now(turn)] == ["d"]


async def test_non_delta_event_flushes_pending_deltas_first():
    clock = FakeClock()
    turn = new_turn(throttle_ms=50, clock=clock)
    turn.apply({"type": "thinking_start"})
    turn.apply({"type": "thinking_delta", "delta": "x"})
    await _take_now(turn)
    turn.apply({"type": "thinking_delta", "delta": "y"})
    turn.apply({"type": "thinking_delta", "delta": "z"})
    turn.apply({"type": "thinking_end"})
    events = await _take_now(turn)
    assert [(e["type"], e.get("delta")) for e in events] == [("thinking_delta", "yz"), ("thinking_end", None)]
    assert events[1]["content"] == "xyz"


async def test_deltas_of_another_block_are_never_merged():
    clock = FakeClock()
    turn = new_turn(throttle_ms=50, clock=clock)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "a"})
    turn.apply({"type": "text_end"})
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "b"})  # first delta of a new block: at once
    events = await _take_now(turn)
    assert [(e["type"], e.get("contentIndex"), e.get("delta")) for e in events if e["type"] == "text_delta"] == [
        ("text_delta", 0, "a"),
        ("text_delta", 1, "b"),
    ]


async def test_throttle_zero_sends_every_delta():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    for part in "abcdef":
        turn.apply({"type": "text_delta", "delta": part})
    deltas = [e["delta"] for e in await _take_now(turn) if e["type"] == "text_delta"]
    assert deltas == list("abcdef")


async def test_coalescing_never_changes_the_text():
    clock = FakeClock()
    turn = new_turn(throttle_ms=50, clock=clock)
    turn.apply({"type": "text_start"})
    parts = [f"w{i} " for i in range(200)]
    seen = []
    for i, part in enumerate(parts):
        clock.now += 0.003
        turn.apply({"type": "text_delta", "delta": part})
        if i % 7 == 0:
            clock.now += 0.05
            seen += await _take_now(turn)
            if turn.queue._held is not None:
                seen.append(await turn.next_event())
    turn.apply({"type": "text_end"})
    turn.settle_done("stop")
    while (event := await turn.next_event()) is not None:
        seen.append(event)
    events = check_events(seen)
    assert "".join(e["delta"] for e in events if e["type"] == "text_delta") == "".join(parts)
    assert sum(e["type"] == "text_delta" for e in events) < len(parts)


# ---------------------------------------------------------------- memory bound (CONTRACT invariant 11)


async def test_a_reader_that_does_not_read_stops_the_producer():
    turn = new_turn(throttle_ms=50, max_pending_bytes=4096)
    turn.apply({"type": "text_start"})
    produced = 0
    blocked = False
    for _ in range(10_000):
        turn.apply({"type": "text_delta", "delta": "x" * 100})
        produced += 100
        if turn.congested:
            waiter = asyncio.ensure_future(turn.wait_drained())
            await asyncio.sleep(0)
            blocked = not waiter.done()
            waiter.cancel()
            break
    assert blocked, "the producer was never told to wait"
    assert produced <= 4096 + 200
    assert turn.queue.pending_bytes <= 4096 + 200


async def test_a_slow_reader_gets_merged_deltas_within_the_bound():
    turn = new_turn(throttle_ms=50, max_pending_bytes=64 * 1024)
    turn.apply({"type": "text_start"})
    total = 0
    received = []

    async def producer():
        nonlocal total
        for i in range(2000):
            turn.apply({"type": "text_delta", "delta": f"{i:08d}"})
            total += 8
            if turn.congested:
                await turn.wait_drained()
        turn.apply({"type": "text_end"})
        turn.settle_done("stop")

    async def reader():
        while (event := await turn.next_event()) is not None:
            received.append(event)
            assert turn.queue.pending_bytes <= 64 * 1024 + 200
            await asyncio.sleep(0)

    await asyncio.gather(producer(), reader())
    events = check_events(received)
    text = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert text == "".join(f"{i:08d}" for i in range(2000))
    assert sum(e["type"] == "text_delta" for e in events) < 2000


async def test_closing_the_reader_releases_a_waiting_producer():
    turn = new_turn(max_pending_bytes=1024)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "x" * 5000})
    assert turn.congested
    waiter = asyncio.ensure_future(turn.wait_drained())
    await asyncio.sleep(0)
    assert not waiter.done()
    turn.close_reader()
    await asyncio.wait_for(waiter, 1)


# ----------------------------------------------------------------- surrogate pairs cut between deltas

GRIN = "\U0001f600"  # 😀, UTF-16 \ud83d\ude00


@pytest.mark.parametrize("kind", ["text", "thinking"])
def test_a_surrogate_pair_cut_between_deltas_is_joined(kind):
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": f"{kind}_start"})
    turn.apply({"type": f"{kind}_delta", "delta": "a \ud83d"})
    turn.apply({"type": f"{kind}_delta", "delta": "\ude00 b"})
    turn.apply({"type": f"{kind}_end"})
    turn.settle_done("stop")
    events = check_events(drain(turn))
    deltas = [e["delta"] for e in events if e["type"] == f"{kind}_delta"]
    assert deltas == ["a ", f"{GRIN} b"]
    assert turn.message["content"][0][kind] == f"a {GRIN} b"
    assert [e["content"] for e in events if e["type"] == f"{kind}_end"] == [f"a {GRIN} b"]


def test_a_delta_that_is_only_a_high_surrogate_waits_for_the_next():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "\ud83d"})
    turn.apply({"type": "text_delta", "delta": "\ude00"})
    turn.apply({"type": "text_end"})
    turn.settle_done("stop")
    events = drain(turn)
    assert [e["delta"] for e in events if e["type"] == "text_delta"] == [GRIN]


def test_halves_that_never_pair_are_dropped():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "x\ude00y \ud83d"})  # a lone low, then a high …
    turn.apply({"type": "text_delta", "delta": "z \ud83d"})  # … followed by no low; a high that ends the block
    turn.apply({"type": "text_end"})
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "\ude00next"})  # a low half never pairs across blocks
    turn.apply({"type": "text_end"})
    turn.settle_done("stop")
    events = check_events(drain(turn))
    assert [b["text"] for b in turn.message["content"]] == ["xy z ", "next"]
    for event in events:
        orjson.dumps(event)  # every event encodes


def test_tool_arguments_cut_inside_a_surrogate_pair_parse():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "toolcall_start", "id": "call_\ud83d1", "toolName": "face"})
    turn.apply({"type": "toolcall_delta", "delta": '{"face": "\ud83d'})
    turn.apply({"type": "toolcall_delta", "delta": '\ude00"}'})
    turn.apply({"type": "toolcall_end"})
    turn.settle_done("toolUse")
    events = check_events(drain(turn))
    assert turn.message["content"][0]["arguments"] == {"face": GRIN}
    assert turn.message["content"][0]["id"] == "call_1"
    for event in events:
        orjson.dumps(event)


def test_an_error_message_with_half_an_emoji_is_valid_text():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "partial \ud83d"})
    turn.settle_error("vendor said \ud83d")
    events = check_events(drain(turn))
    assert turn.message["content"][0]["text"] == "partial "
    assert turn.message["errorMessage"] == "vendor said "
    for event in events:
        orjson.dumps(event)


def test_coalesced_deltas_join_a_cut_pair_too():
    clock = FakeClock()
    turn = new_turn(throttle_ms=50, clock=clock)
    turn.apply({"type": "text_start"})
    for delta in ["a", "b\ud83d", "\ude00c", "\ud83d", "\ude00"]:
        turn.apply({"type": "text_delta", "delta": delta})
    turn.apply({"type": "text_end"})
    turn.settle_done("stop")
    events = check_events(drain(turn))
    assert "".join(e["delta"] for e in events if e["type"] == "text_delta") == f"ab{GRIN}c{GRIN}"


# ----------------------------------------------------------------- the token limit inside a block


def test_the_token_limit_inside_a_tool_call_is_a_tool_arguments_error():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "Let me check."})
    turn.apply({"type": "text_end"})
    turn.apply({"type": "toolcall_start", "id": "toolu_1", "toolName": "get_weather"})
    turn.apply({"type": "toolcall_delta", "delta": '{"city": "Pa'})
    with pytest.raises(ToolArgumentsError) as raised:
        turn.settle_done("length")
    assert (
        str(raised.value)
        == "tool call toolu_1 (get_weather): arguments were cut off by the token limit (stop reason length)"
    )
    assert (raised.value.call_id, raised.value.name) == ("toolu_1", "get_weather")
    assert not turn.settled and [b["type"] for b in turn.message["content"]] == ["text"]
    assert turn.settle_error(f"p/m {raised.value}")
    events = check_events(drain(turn))
    assert "toolcall_end" not in [e["type"] for e in events]


def test_the_token_limit_inside_a_text_block_ends_the_block():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "text_start"})
    turn.apply({"type": "text_delta", "delta": "cut he"})
    assert turn.settle_done("length")
    events = check_events(drain(turn))
    assert [e["type"] for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert events[-2]["content"] == "cut he" and events[-1]["reason"] == "length"


def test_any_other_stop_with_an_open_block_is_a_contract_violation():
    turn = new_turn(throttle_ms=0)
    turn.apply({"type": "toolcall_start", "id": "c1", "toolName": "t"})
    with pytest.raises(ContractViolation, match="open"):
        turn.settle_done("toolUse")


def test_the_adapter_event_vocabulary_is_what_the_turn_takes():
    """The typed vocabulary (`app.contract.adapter_events`) and the message builder agree: every event type
    but `finish` (the dispatcher's) is taken, and the builder takes no type the vocabulary lacks."""
    import typing

    from app.contract.adapter_events import AdapterEvent
    from app.stream import message

    shapes = typing.get_args(AdapterEvent)
    kinds = {kind for shape in shapes for kind in typing.get_args(typing.get_type_hints(shape)["type"])}
    taken = set(message._BLOCK_KINDS) | set(message._BLOCK_OF) | set(message._SEARCH_KINDS) | {"usage"}
    assert kinds == taken | {"finish"}
    turn = new_turn(throttle_ms=0)
    for kind in ("text", "thinking"):
        turn.apply({"type": f"{kind}_start"})
        turn.apply({"type": f"{kind}_delta", "delta": "x"})
        turn.apply({"type": f"{kind}_end"})
    turn.apply({"type": "toolcall_start", "id": "c1", "toolName": "t"})
    turn.apply({"type": "toolcall_delta", "delta": "{}"})
    turn.apply({"type": "toolcall_end"})
    turn.apply({"type": "usage", "input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0})
    with pytest.raises(ContractViolation):
        turn.apply({"type": "text_stop"})


def _search_turn(hosted: bool) -> Turn:
    turn = Turn("req_search", throttle_ms=0)
    turn.builder.hosted = hosted
    turn.prepare("anthropic", "anthropic-messages", "m", None)
    return turn


def test_a_web_search_is_a_block_only_for_a_request_that_asked_for_hosted_tools():
    end = {"type": "websearch_end", "id": "s1", "query": "q", "status": "completed",
           "sources": [{"url": "https://example.com", "title": "Ex"}, {"url": ""}]}  # fmt: skip
    quiet = _search_turn(hosted=False)
    quiet.apply({"type": "websearch_start", "id": "s1"})
    assert not quiet.started  # a search alone does not even start the stream
    quiet.apply(end)
    quiet.apply({"type": "text_start"})
    quiet.apply({"type": "websearch_start", "id": "s2"})  # ignored after the start too
    quiet.apply({"type": "text_end"})
    assert [b["type"] for b in quiet.message["content"]] == ["text"]

    turn = _search_turn(hosted=True)
    turn.apply({"type": "websearch_start", "id": "s1"})
    turn.apply(end)
    turn.settle_done("stop")
    block = {"type": "webSearch", "id": "s1", "query": "q", "status": "completed",
             "sources": [{"url": "https://example.com", "title": "Ex"}]}  # fmt: skip
    assert turn.message["content"] == [block]
    events = check_events(drain(turn))
    assert [e["type"] for e in events] == ["start", "websearch_start", "websearch_end", "done"]
    assert events[1] == {"type": "websearch_start", "contentIndex": 0, "id": "s1"}
    assert events[2] == {"type": "websearch_end", "contentIndex": 0, "webSearch": block}


def test_a_search_that_never_ended_stays_searching():
    turn = _search_turn(hosted=True)
    turn.apply({"type": "websearch_start", "id": "s1"})
    turn.settle_error("connection lost")
    assert turn.message["content"] == [
        {"type": "webSearch", "id": "s1", "query": "", "status": "searching", "sources": []}
    ]


def test_a_web_search_may_not_start_inside_another_block():
    turn = _search_turn(hosted=True)
    turn.apply({"type": "text_start"})
    with pytest.raises(ContractViolation):
        turn.apply({"type": "websearch_start", "id": "s1"})
