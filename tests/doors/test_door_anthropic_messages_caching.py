"""Prompt caching kept through the Messages door: a 10-turn Claude Code-shaped conversation, the fraction of
input tokens that would be cache reads upstream, through the door and sent direct.

The simulator answers with fixed usage, so the caches are modelled here, on the exact request bodies that reached
the simulated vendor (kept simple and stated):
- tokens ≈ UTF-8 bytes / 4 of each unit's JSON (a tool, a system block, a message block);
- Anthropic: a `cache_control` breakpoint (or the top-level automatic one, at the last block) writes the prefix
  up to it (tools, then system, then messages); a request reads the longest prefix, ending at a block boundary
  at or before its last breakpoint, that an earlier request wrote; what lies between that and its last
  breakpoint is written;
- OpenAI: prefixes of 1,024 tokens and more are cached automatically, in 128-token steps, among requests with
  the same `prompt_cache_key`; a request reads its longest common prefix with an earlier one.
"Direct" is the same model applied to Claude Code's own bodies as it would send them to Anthropic.
`pytest -s` prints the figures.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import marker

CAPTURE = json.loads((Path(__file__).parents[1] / "claude_code" / "claude-code-2.json").read_text())
TURNS = 10
HOP_HEADERS = {"host", "content-length", "connection", "x-api-key", "accept-encoding"}


def tokens(unit: Any) -> int:
    return max(1, len(json.dumps(unit, ensure_ascii=False).encode()) // 4)


def conversation(m: str) -> list[dict[str, Any]]:
    """Ten request bodies of one conversation, as Claude Code grows it: each turn adds the assistant's Bash call
    and its result, and moves the message breakpoint to the newest tool result."""
    body = copy.deepcopy(CAPTURE["body"])
    body["messages"][0]["content"].append({"type": "text", "text": m})
    bodies = []
    for turn in range(TURNS):
        bodies.append(copy.deepcopy(body))
        for message in body["messages"]:
            if isinstance(message["content"], list):
                for block in message["content"]:
                    block.pop("cache_control", None)
        call = f"toolu_turn_{turn}"
        body["messages"].append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running step {turn}."},
                    {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": f"ls -la src/{turn}"}},
                ],
            }
        )
        output = "\n".join(f"-rw-r--r-- 1 dev dev {1000 + i} file_{turn}_{i}.py" for i in range(60))
        body["messages"].append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call,
                        "content": output,
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            }
        )
    return bodies


def anthropic_units(body: dict[str, Any]) -> list[tuple[int, bool]]:
    """(tokens, breakpoint after it) per unit, in Anthropic's prefix order: tools, system, messages."""
    units: list[tuple[int, bool]] = []
    for tool in body.get("tools") or []:
        units.append((tokens(tool), "cache_control" in tool))
    system = body.get("system") or []
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
        units.append((tokens(block), "cache_control" in block))
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            units.append((tokens({"role": message["role"], **block}), "cache_control" in block))
    if body.get("cache_control") and units:
        units[-1] = (units[-1][0], True)
    return units


def prefix_keys(body: dict[str, Any], units: list[Any], parts: list[Any]) -> list[str]:
    """A hash per prefix (units[:i+1]), so that equal prefixes of different requests match."""
    digest = hashlib.sha256()
    keys = []
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True).encode())
        keys.append(digest.copy().hexdigest())
    return keys


def anthropic_parts(body: dict[str, Any]) -> list[Any]:
    parts: list[Any] = list(body.get("tools") or [])
    system = body.get("system") or []
    parts.extend(
        [{"type": "text", "text": system}]
        if isinstance(system, str)
        else [{k: v for k, v in b.items() if k != "cache_control"} for b in system]
    )
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            parts.append({"role": message["role"], **{k: v for k, v in block.items() if k != "cache_control"}})
    return parts


def anthropic_cache(bodies: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(cache read, cache write, all input) tokens over the conversation."""
    written: set[str] = set()
    read = write = total = 0
    for body in bodies:
        units = anthropic_units(body)
        keys = prefix_keys(body, units, anthropic_parts(body))
        sizes = [u[0] for u in units]
        total += sum(sizes)
        breakpoints = [i for i, (_, mark) in enumerate(units) if mark]
        if not breakpoints:
            continue
        last = breakpoints[-1]
        hit = max((i for i in range(last + 1) if keys[i] in written), default=-1)
        read += sum(sizes[: hit + 1])
        write += sum(sizes[hit + 1 : last + 1])
        written.update(keys[i] for i in breakpoints)
    return read, write, total


def openai_cache(bodies: list[dict[str, Any]]) -> tuple[int, int]:
    """(cache read, all input) tokens: automatic prefix caching per prompt_cache_key."""
    seen: dict[Any, list[bytes]] = {}
    read = total = 0
    for body in bodies:
        prompt = json.dumps([body.get("tools"), body.get("instructions"), body["input"]], ensure_ascii=False).encode()
        size = len(prompt) // 4
        total += size
        best = 0
        for earlier in seen.get(body.get("prompt_cache_key"), []):
            common = next(
                (i for i, (a, b) in enumerate(zip(prompt, earlier)) if a != b), min(len(prompt), len(earlier))
            )
            best = max(best, common // 4)
        if best >= 1024:
            read += best // 128 * 128
        seen.setdefault(body.get("prompt_cache_key"), []).append(prompt)
    return read, total


@pytest.fixture(scope="module")
def gateway(gateway_factory: Any) -> Any:
    return gateway_factory(throttle_ms=0)


def through_the_door(gateway: Any, provider: str) -> list[dict[str, Any]]:
    m = marker()
    headers = {k: v for k, v in CAPTURE["headers"].items() if k.lower() not in HOP_HEADERS}
    for body in conversation(m):
        response = gateway.http.post(CAPTURE["path"], json={**body, "model": f"{provider}/text"}, headers=headers)
        assert response.status_code == 200, response.text
    seen = gateway.sim.seen(m)
    assert len(seen) == TURNS
    return [s["body"] for s in seen]


def test_claude_code_conversation_reads_as_much_from_anthropics_cache_through_the_door_as_direct(gateway):
    direct = anthropic_cache(conversation(marker()))
    door = anthropic_cache(through_the_door(gateway, "anthropic"))
    print(
        f"\nanthropic direct: read {direct[0]} write {direct[1]} of {direct[2]} input tokens = {direct[0] / direct[2]:.1%} reads"
    )
    print(
        f"anthropic via door: read {door[0]} write {door[1]} of {door[2]} input tokens = {door[0] / door[2]:.1%} reads"
    )
    assert door[0] / door[2] == pytest.approx(direct[0] / direct[2], abs=0.01)


def test_through_the_door_openai_gets_one_cache_key_per_conversation_and_a_stable_prefix(gateway):
    bodies = through_the_door(gateway, "openai")
    assert len({b["prompt_cache_key"] for b in bodies}) == 1
    read, total = openai_cache(bodies)
    direct = anthropic_cache(conversation(marker()))
    print(
        f"\nopenai via door: read {read} of {total} input tokens = {read / total:.1%} reads "
        f"(anthropic direct {direct[0] / direct[2]:.1%})"
    )
    assert read / total > 0.8


# What each simulated vendor reports for `input=40;cache_read=300;cache_write=20`: Anthropic all three; OpenAI,
# Gemini and Chat Completions report reads inside their prompt count and have no cache writes.
EXPECTED_USAGE = {
    "anthropic": {"input_tokens": 40, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 20},
    "openai": {"input_tokens": 40, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
    "google": {"input_tokens": 40, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
    "compat": {"input_tokens": 40, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0},
}


@pytest.mark.parametrize("provider", sorted(EXPECTED_USAGE))
def test_a_claude_code_turn_reports_each_vendors_cache_reads_and_writes_exactly(gateway, provider):
    headers = {k: v for k, v in CAPTURE["headers"].items() if k.lower() not in HOP_HEADERS}
    body = {
        **conversation(marker())[1],
        "model": f"{provider}/text;input=40;cache_read=300;cache_write=20",
        "stream": False,
    }
    response = gateway.http.post(CAPTURE["path"], json=body, headers=headers)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert {k: usage.get(k) or 0 for k in EXPECTED_USAGE[provider]} == EXPECTED_USAGE[provider]


def test_one_hour_cache_writes_reach_the_client_broken_down_as_anthropic_reports_them(gateway):
    """Issue 39 item 7: the vendor's `cache_creation` breakdown (5-minute and 1-hour writes) reaches a Messages
    client, streamed and not."""
    body = {
        "model": "anthropic/text;cache_write=1000;cache_write_1h=600",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": marker()}],
    }
    breakdown = {"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 600}
    answer = gateway.http.post("/v1/messages", json=body)
    assert answer.status_code == 200, answer.text
    usage = answer.json()["usage"]
    assert usage["cache_creation_input_tokens"] == 1000 and usage["cache_creation"] == breakdown
    streamed = gateway.http.post("/v1/messages", json={**body, "stream": True})
    starts = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert starts[0]["message"]["usage"]["cache_creation"] == breakdown
    assert [e for e in starts if e["type"] == "message_delta"][0]["usage"]["cache_creation"] == breakdown
