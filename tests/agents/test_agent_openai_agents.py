"""The OpenAI Agents SDK for Python (`openai-agents`, pinned in the dev group) against the Responses door: an
agent with a function tool, its `OpenAIResponsesModel` on an `AsyncOpenAI` client pointed at the gateway, run
with `Runner.run` and `Runner.run_streamed`, in front of the simulator speaking Anthropic, OpenAI and Gemini.

The simulator's `agent-tool` scenario calls `Bash` with `cat proof.txt` on the first turn and, on the turn that
carries the tool's result, answers with that result's text: the agent's final output holds what the tool
returned only if the whole loop (call, execution, result sent back through the door) worked. Tracing is off
(`RunConfig(tracing_disabled=True)`): nothing leaves the machine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner, function_tool
from agents.stream_events import RawResponsesStreamEvent, RunItemStreamEvent
from openai import AsyncOpenAI

from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-agents-0001"
OFFLINE = RunConfig(tracing_disabled=True)


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"agents:{KEY}")


def agent_for(gw: Any, vendor: str, proof: str, ran: list[dict[str, str]], **settings: Any) -> Agent:
    @function_tool(name_override="Bash")
    def bash(command: str, description: str) -> str:
        """Run a shell command and return what it printed."""
        ran.append({"command": command, "description": description})
        return proof

    client = AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)
    return Agent(
        name="shell agent", instructions="Use the Bash tool to answer.", tools=[bash],
        model=OpenAIResponsesModel(model=f"{vendor}/agent-tool", openai_client=client),
        model_settings=ModelSettings(**settings),
    )  # fmt: skip


@pytest.mark.parametrize("vendor", VENDORS)
async def test_runner_run_calls_the_function_tool_and_answers_with_its_result(gw, vendor):
    proof, ran = f"proof-{marker()}", []
    result = await Runner.run(agent_for(gw, vendor, proof, ran), "What does proof.txt say?", run_config=OFFLINE)
    assert ran == [{"command": "cat proof.txt", "description": "Show the proof file"}]
    assert proof in result.final_output and result.final_output.startswith("The tool said:")
    # Two model calls through the door, each a completed response; the second carried the tool's output.
    assert len(result.raw_responses) == 2
    assert all(r.usage.input_tokens > 0 and r.usage.output_tokens > 0 for r in result.raw_responses)
    kinds = [item.type for item in result.new_items]
    assert kinds == ["message_output_item", "tool_call_item", "tool_call_output_item", "message_output_item"]
    second = [e for e in gw.sim.seen(proof) if e["vendor"] == vendor]
    assert second and "Use the Bash tool to answer." in json.dumps(second[-1]["body"])


@pytest.mark.parametrize("vendor", VENDORS)
async def test_runner_run_streamed_streams_text_and_the_tool_loop(gw, vendor):
    proof, ran = f"proof-{marker()}", []
    streamed = Runner.run_streamed(agent_for(gw, vendor, proof, ran), "What does proof.txt say?", run_config=OFFLINE)
    raw: list[str] = []
    items: list[str] = []
    deltas: list[str] = []
    async for event in streamed.stream_events():
        if isinstance(event, RawResponsesStreamEvent):
            raw.append(event.data.type)
            if event.data.type == "response.output_text.delta":
                deltas.append(event.data.delta)
        elif isinstance(event, RunItemStreamEvent):
            items.append(event.name)
    assert ran == [{"command": "cat proof.txt", "description": "Show the proof file"}]
    assert proof in streamed.final_output and "".join(deltas) == "Let me look." + streamed.final_output
    assert raw.count("response.created") == 2 and raw.count("response.completed") == 2
    assert "response.function_call_arguments.delta" in raw and "response.failed" not in raw
    assert items == ["message_output_created", "tool_called", "tool_output", "message_output_created"]


async def test_an_agent_with_parallel_tool_calls_off_reaches_the_vendor_as_its_switch(gw):
    proof, ran = f"proof-{marker()}", []
    agent = agent_for(gw, "anthropic", proof, ran, parallel_tool_calls=False)
    result = await Runner.run(agent, f"What does proof.txt say? {proof}", run_config=OFFLINE)
    assert proof in result.final_output
    first = gw.sim.seen(proof)[0]["body"]
    assert first["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
