"""A simulated vendor prompt cache, per simulator instance (one instance: one deployment), opt-in per request
with the scenario parameter `prompt_cache=1` (e.g. the model id `text;prompt_cache=1`).

Vendors cache a prompt by its prefix: a request whose beginning was part of an earlier request to the same
deployment reads that part from the cache. Here a prompt is a list of blocks — its preamble (system prompt or
instructions, tools), then each message or input item, in order — and a block is about four characters per
token. The instance remembers every prefix (at block boundaries) of the prompts it served; a new prompt's
longest remembered prefix is its cache read, the rest is input. The counts replace the scenario's usage, so
each vendor encoder reports them in its own fields (Anthropic `cache_read_input_tokens`, OpenAI
`cached_tokens`, Gemini `cachedContentTokenCount`). Without the parameter nothing is remembered or changed.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

from simulator import scenarios as s

PREAMBLE_KEYS = ("system", "instructions", "tools", "systemInstruction", "system_instruction")
CONVERSATION_KEYS = ("messages", "input", "contents")
CHARS_PER_TOKEN = 4


def wanted(model: str) -> bool:
    """Whether a model id asks for the prompt cache (`…;prompt_cache=1`)."""
    return "prompt_cache=1" in model.split(";")[1:]


def without_markers(value: Any) -> Any:
    """`value` without Anthropic's `cache_control` markers: they say where to cache, they are not the prompt
    (a client moves its breakpoint to the newest message each turn)."""
    if isinstance(value, dict):
        return {k: without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_markers(v) for v in value]
    return value


def blocks(body: dict[str, Any]) -> list[str]:
    """A request's prompt as the blocks a prefix is made of: the preamble, then each conversation item."""
    preamble = {key: body[key] for key in PREAMBLE_KEYS if key in body}
    items: Any = next((body[key] for key in CONVERSATION_KEYS if key in body), [])
    if isinstance(items, str):
        items = [items]
    return [json.dumps(without_markers(part), sort_keys=True) for part in [preamble, *(items or [])]]


def tokens(block: str) -> int:
    return max(1, len(block) // CHARS_PER_TOKEN)


class PromptCache:
    """The prefixes one instance has served (the newest `keep`), by the SHA-256 of their blocks."""

    def __init__(self, keep: int = 100_000) -> None:
        self.keep = keep
        self._prefixes: OrderedDict[bytes, None] = OrderedDict()

    def serve(self, body: dict[str, Any]) -> tuple[int, int]:
        """(input tokens not cached, tokens read from the cache) for this request's prompt; then remembers
        every prefix of it."""
        digest = hashlib.sha256()
        cached = total = 0
        seen: list[bytes] = []
        for block in blocks(body):
            digest.update(hashlib.sha256(block.encode()).digest())
            key = digest.copy().digest()
            total += tokens(block)
            if key in self._prefixes:
                cached = total
                self._prefixes.move_to_end(key)
            seen.append(key)
        for key in seen:
            self._prefixes[key] = None
        while len(self._prefixes) > self.keep:
            self._prefixes.popitem(last=False)
        return total - cached, cached

    def apply(self, scenario: s.Scenario, body: dict[str, Any]) -> None:
        """Set the scenario's usage to this prompt's uncached input and cache read."""
        uncached, cached = self.serve(body)
        for step in scenario.steps:
            if isinstance(step, s.Usage):
                step.input, step.cache_read = uncached, cached
