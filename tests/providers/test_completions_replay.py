"""The 14 recorded Chat Completions streams (tests/wire_samples/chat/, provenance in its SOURCES.md), replayed
byte for byte by the simulator through the real `openai` SDK over loopback, each normalized to the outcome
SOURCES.md documents, with coalescing off and at 50 ms."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import turn


@dataclass
class Outcome:
    terminal: str  # done | error
    reason: str | None = None  # done: stop | length | toolUse
    blocks: list[str] = field(default_factory=list)  # block types in order (error: the ones that must be there)
    text: str | None = None
    thinking: tuple[int, str] | None = None  # (length, beginning)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (name, id, arguments)
    usage: tuple[int, tuple[int, ...], int] | None = None  # (input, accepted outputs, cacheRead)
    error_words: tuple[str, ...] = ()  # each found (case-insensitive) in the errorMessage
    optional: tuple[str, ...] = ()  # block types an error may drop
    signature: str | None = None  # beginning of the thinking signature


OUTCOMES = {
    "crusoe-llama33-text": Outcome("done", "stop", ["text"], "1, 2, 3, 4, 5", usage=(46, (14,), 0)),
    "groq-kimi-text-usage-twice": Outcome("done", "stop", ["text"], "Olá!", usage=(20, (4,), 0)),
    "gpt4o-mini-tool-fragmented": Outcome(
        "done",
        "toolUse",
        ["toolCall"],
        calls=[("get_capital", "call_ZR5UUuTt3pf61kjwAJIYdVMj", {"country": "UK"})],
        usage=(53, (15,), 0),
    ),
    "gpt4o-parallel-noargs": Outcome(
        "done",
        "toolUse",
        ["toolCall", "toolCall"],
        calls=[
            ("get_country", "call_q2UyBRP7eXNTzAoR8lEhjc9Z", {}),
            ("get_product_name", "call_b51ijcpFkDiTQG1bQzsrmtW5", {}),
        ],
        usage=(364, (40,), 0),
    ),
    "xai-grok4fast-tool-whole-cached": Outcome(
        "done",
        "toolUse",
        ["toolCall"],
        calls=[("weather", "call_51851897", {"location": "Florence, Italy"})],
        usage=(1, (261, 26), 360),
    ),
    "deepseek-reasoner-text": Outcome(
        "done",
        "stop",
        ["thinking", "text"],
        "Hello there! 😊 How can I help you today?",
        (882, "Hmm, the user just said "),
        usage=(6, (212,), 0),
    ),
    "llamacpp-gptoss-reasoning-text": Outcome(
        "done", "stop", ["thinking", "text"], "Olá!", (176, 'The user: "Say hi in Por'), usage=(84, (57,), 0)
    ),
    "groq-gptoss-reasoning-tool": Outcome(
        "done",
        "toolUse",
        ["thinking", "toolCall"],
        thinking=(727, "We need to comply with t"),
        calls=[("final_result", "fc_299e8414-9e94-4d9c-bd06-c096f8919768", {"response": "no"})],
        usage=(343, (180,), 0),
    ),
    "openrouter-claude-reasoning-details": Outcome(
        "done",
        "stop",
        ["thinking", "text"],
        "2 + 2 = 4",
        (51, "This is a simple arithme"),
        usage=(43, (36,), 0),
        signature="Et0BCkgIChACGAIqQA2s",
    ),
    "mistral-magistral-content-parts-short": Outcome(
        "done", "stop", ["thinking", "text"], "2 + 2 = 4", (60, "The user is asking for 2"), usage=(10, (46,), 0)
    ),
    "together-llama4-length": Outcome(
        "done",
        "length",
        ["text"],
        "Here is a list of all 50 U.S. states in alphabetical order:\n\n1. Alabama (AL)\n2. Alaska (AK)\n3. Arizona (AZ)\n"
        "4. Arkansas (AR)\n5. California (CA)\n6. Colorado (",
        usage=(18, (50,), 0),
    ),
    "groq-gptoss-stream-error-after-text": Outcome(
        "error",
        blocks=["thinking", "text"],
        text="maybe",
        thinking=(361, 'The user says: "dont mak'),
        error_words=("tool choice is required",),
        optional=("thinking", "text"),
    ),
    "gpt4o-refusal-logprobs": Outcome(
        "error",
        blocks=["text"],
        text="I'm very sorry, but I can't assist with that.",
        usage=(79, (12,), 0),
        error_words=("refus",),
        optional=("text",),
    ),
    "snowflake-no-finish-text": Outcome(
        "error", blocks=["text"], text="4", usage=(22, (5,), 0), error_words=("finish_reason",), optional=("text",)
    ),
}


@pytest.mark.parametrize("throttle", [0, 50])
@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_recorded_stream_normalizes_to_its_documented_outcome(gateway, name, throttle):
    expected = OUTCOMES[name]
    model = f"compat/replay-{name}"
    result = gateway.stream(turn(model, options={"throttleMs": throttle}))
    assert result.status == 200
    terminal, message = result.terminal, result.message
    assert terminal["type"] == expected.terminal, terminal.get("errorMessage")
    content = message["content"]
    kinds = [b["type"] for b in content]
    if expected.terminal == "done":
        assert terminal["reason"] == expected.reason
        assert kinds == expected.blocks
    else:
        assert [k for k in expected.blocks if k in kinds] == kinds  # nothing else, in order
        assert set(expected.blocks) - set(kinds) <= set(expected.optional)
        error = terminal["errorMessage"]
        assert error.startswith(f"{model} ")  # names the provider and the model
        for word in expected.error_words:
            assert word in error.lower()
    by_kind = {k: b for k, b in zip(kinds, content)}
    if expected.text is not None and "text" in by_kind:
        assert by_kind["text"]["text"] == expected.text
    elif expected.terminal == "done":
        assert "text" not in by_kind
    if expected.thinking is not None and "thinking" in by_kind:
        length, start = expected.thinking
        assert len(by_kind["thinking"]["thinking"]) == length and by_kind["thinking"]["thinking"].startswith(start)
    if expected.signature is not None:
        assert by_kind["thinking"]["thinkingSignature"].startswith(expected.signature)
    calls = [(b["name"], b["id"], b["arguments"]) for b in content if b["type"] == "toolCall"]
    assert calls == expected.calls
    usage = terminal["usage"]
    if expected.usage is None:
        assert (usage["input"], usage["output"], usage["cacheRead"]) == (0, 0, 0)
    else:
        input_, outputs, cache_read = expected.usage
        assert (usage["input"], usage["cacheRead"], usage["cacheWrite"]) == (input_, cache_read, 0)
        assert usage["output"] in outputs
        assert usage["totalTokens"] == input_ + usage["output"] + cache_read
    # The streamed deltas add up to the final blocks (whatever the coalescing).
    for index, block in enumerate(content):
        if block["type"] in ("text", "thinking"):
            joined = "".join(
                e["delta"] for e in result.events if e.get("contentIndex") == index and e["type"].endswith("_delta")
            )
            assert joined == block[block["type"]]
