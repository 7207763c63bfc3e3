"""The 8 recorded Anthropic streams, replayed byte for byte by the simulator through the real SDK path.

Expected outcomes are those stated in tests/wire_samples/SOURCES.md.
"""

from __future__ import annotations

import pytest

from tests.conftest import turn


def replay(gateway, name: str):
    result = gateway.stream(turn(f"anthropic/replay-{name}"))
    assert result.status == 200
    return result


def texts(result) -> str:
    return "".join(b["text"] for b in result.message["content"] if b["type"] == "text")


def calls(result) -> list[dict]:
    return [b for b in result.message["content"] if b["type"] == "toolCall"]


def usage(result) -> tuple[int, int, int, int]:
    u = result.terminal["usage"]
    return u["input"], u["output"], u["cacheRead"], u["cacheWrite"]


def test_text_nonascii_cache_fields(gateway):
    result = replay(gateway, "text-nonascii-cache-fields")
    assert (
        texts(result)
        == 'Olá! (Oh-LAH)\n\nThat\'s "hello" in Portuguese. You can also say "Oi!" (Oy) for a more casual "hi!"'
    )
    assert result.terminal["reason"] == "stop"
    assert usage(result) == (16, 43, 0, 0)


def test_adaptive_thinking_between_text_blocks(gateway):
    result = replay(gateway, "adaptive-thinking-text")
    kinds = [b["type"] for b in result.message["content"]]
    assert kinds == ["text", "thinking", "text"]
    thinking = result.message["content"][1]
    assert thinking["thinking"] == "Brief answer with two pet pelican names."
    assert len(thinking["thinkingSignature"]) == 284
    assert texts(result) == "\n\n1. **Captain Scoop**\n2. **Gullet**"
    assert usage(result)[:2] == (34, 44)


def test_thinking_then_tool_with_empty_args(gateway):
    result = replay(gateway, "thinking-tool-empty-args")
    thinking = result.message["content"][0]
    assert thinking["thinking"].startswith("The user wants me to:\n1. Use the fixed_version tool")
    assert len(thinking["thinkingSignature"]) == 524
    assert calls(result) == [
        {"type": "toolCall", "id": "toolu_01825dXWLSoJwCst1qTsiWdb", "name": "fixed_version", "arguments": {}}
    ]
    assert result.terminal["reason"] == "toolUse"
    assert usage(result)[:2] == (598, 92)


def test_parallel_tools_with_empty_args(gateway):
    result = replay(gateway, "tools-parallel-empty-args")
    assert [(c["id"], c["arguments"]) for c in calls(result)] == [
        ("toolu_01LtHJmixrs9NcWQkK8hu8hj", {}),
        ("toolu_01N8a4jWyf116qKTMqKKmjyt", {}),
    ]
    assert result.terminal["reason"] == "toolUse"
    assert usage(result)[:2] == (542, 62)


def test_three_parallel_tools(gateway):
    result = replay(gateway, "tools-parallel-3")
    assert [(c["name"], c["arguments"]) for c in calls(result)] == [
        ("searchDocs", {"query": "alpha"}),
        ("searchDocs", {"query": "beta"}),
        ("searchDocs", {"query": "gamma"}),
    ]
    assert [e["contentIndex"] for e in result.events if e["type"] == "toolcall_start"] == [0, 1, 2]
    assert usage(result)[:2] == (798, 110)


def test_max_tokens_with_cache_write(gateway):
    result = replay(gateway, "max-tokens-cache-write")
    assert texts(result) == "OK"
    assert result.terminal["reason"] == "length"
    assert usage(result) == (3, 1, 0, 18639)


def test_compaction_block_is_skipped_and_iterations_are_summed(gateway):
    result = replay(gateway, "cache-read-compaction")
    assert texts(result) == "Hello! 👋"
    assert [b["type"] for b in result.message["content"]] == ["text"]
    # Both iterations are billed: compaction (100 in, 83 out, 55096 cache read) + message (181 in, 8 out).
    assert usage(result) == (281, 91, 55096, 0)


def test_server_tools_are_not_client_calls(gateway):
    result = replay(gateway, "web-search-citations")
    text = texts(result)
    assert len(text) == 650
    assert text.startswith("Based on the search results, here's the current weather in San Francisco:")
    assert text.endswith("periods of rain this weekend.")
    assert calls(result) == []
    assert result.terminal["reason"] == "stop"
    assert usage(result)[:2] == (10423, 341)


@pytest.mark.parametrize("throttle", [0, 50])
def test_replay_is_the_same_with_and_without_coalescing(gateway, throttle):
    result = gateway.stream(turn("anthropic/replay-web-search-citations", options={"throttleMs": throttle}))
    assert len(texts(result)) == 650
