"""The simulator's prompt cache (simulator/prompt_cache.py): per instance, by prompt prefix, opt-in."""

from __future__ import annotations

from simulator import scenarios as s
from simulator.prompt_cache import PromptCache, blocks, tokens, wanted


def anthropic_body(*texts: str, system: str = "You are terse.") -> dict:
    """A Messages request whose last message carries the cache breakpoint (as clients move it each turn)."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {"model": "text;prompt_cache=1", "system": system, "messages": messages}


def test_a_prompt_reads_the_prefix_this_instance_served_before():
    cache = PromptCache()
    first = anthropic_body("hello " * 50)
    uncached, cached = cache.serve(first)
    assert (uncached, cached) == (sum(tokens(b) for b in blocks(first)), 0)
    # The next turn: the first message comes again (without its cache_control marker), then the reply and a
    # new message; the preamble and the first message are read from the cache.
    second = anthropic_body("hello " * 50, "a reply", "and more " * 20)
    uncached2, cached2 = cache.serve(second)
    assert cached2 == uncached and uncached2 == sum(tokens(b) for b in blocks(second)[2:])
    assert PromptCache().serve(second) == (uncached2 + cached2, 0)  # another instance has seen nothing


def test_another_system_prompt_is_another_prefix():
    cache = PromptCache()
    cache.serve(anthropic_body("hello " * 50))
    assert cache.serve(anthropic_body("hello " * 50, system="You are verbose."))[1] == 0


def test_the_cache_is_opt_in_and_sets_the_scenarios_usage():
    assert wanted("text;prompt_cache=1") and wanted("slow;n=4;prompt_cache=1")
    assert not wanted("text") and not wanted("prompt_cache=1") and not wanted("text;prompt_cache=0")
    cache = PromptCache()
    body = anthropic_body("hello " * 50)
    cache.serve(body)
    scenario = s.build("text;prompt_cache=1", "hello")
    cache.apply(scenario, body)
    [usage] = [step for step in scenario.steps if isinstance(step, s.Usage)]
    assert usage.cache_read == sum(tokens(b) for b in blocks(body)) and usage.input == 0
