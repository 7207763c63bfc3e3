"""Vendor-neutral scenarios: what the simulated model does, as a list of steps each vendor encoder renders.

The scenario is chosen by the model id: `<name>` or `<name>;key=value;key=value`, e.g. `slow;n=64;delay_ms=20`.
A model id that names no scenario (e.g. `claude-sonnet-4-5`) plays `text` (the gateway's demo mode serves only
ids its catalog lists, scenarios included: `app.catalog.demo_clouds.demo_serves`). In demo mode a scenario calls
only the tools the request declares (`only_declared_tools`).
With any scenario, `prompt_cache=1` reports usage from the simulator instance's prompt cache: the prompt prefix
this instance served before as cache read, the rest as input (`simulator/prompt_cache.py`).

`replay-<name>` serves a recorded wire sample byte for byte. The samples are in `tests/wire_samples/`, each
file named by its vendor's prefix and its name: `anthropic-<name>.sse`, `openai-responses-<name>.sse`,
`gemini-<name>.sse`, `chat/chat-<name>.sse` (the `compat` provider). One rule for every vendor: the scenario
is `<provider>/replay-<file name without .sse and without the vendor prefix>`, e.g.
`anthropic/replay-web-search-citations`, `google/replay-3-tool-id-empty-args` (a Gemini 3 sample),
`compat/replay-groq-gptoss-reasoning-tool` (the prefixes: `sample_prefix` in `simulator/app.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Union


def wire_json(data: Any) -> str:
    """JSON for a wire frame: UTF-8 as vendors send it, but `\\uXXXX` escapes when the data holds a lone
    surrogate (a vendor that cuts an emoji between events sends half a UTF-16 pair as an escape)."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(data)
    return text


@dataclass
class Usage:
    input: int = 25
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0  # of `cache_write`, the tokens written to a 1-hour cache (Anthropic's wire only)


@dataclass
class TextBlock:
    chunks: list[str]
    signature: str | None = None


@dataclass
class ThinkingBlock:
    chunks: list[str]
    signature: str = "sig-sim-0001"


@dataclass
class RedactedThinking:
    data: str = "redacted-sim-payload"


@dataclass
class ToolCallBlock:
    id: str
    name: str
    fragments: list[str]
    # Where the format allows: None streams the fragments; "done" sends the arguments only whole at the end of
    # the call (OpenAI `function_call_arguments.done`), "item" only with the finished item (`output_item.done`).
    whole: str | None = None
    # The token limit cut the call: its fragments stop short and the vendor never closes it (where the format
    # streams arguments; Gemini sends calls whole, so there the call is never sent).
    cut: bool = False
    signature: str | None = None  # the call's own signature, where the format has one (Gemini's thoughtSignature)
    gemini_id: bool = False  # Gemini sends the id on the functionCall (Gemini 3); without, no id (Gemini 2.x)


@dataclass
class WebSearch:
    """The vendor ran its own web search (a hosted tool): Anthropic `server_tool_use` + `web_search_tool_result`
    blocks, an OpenAI `web_search_call` item, Gemini `groundingMetadata` on the last chunk."""

    query: str = "gateway simulator weather"
    sources: list[tuple[str, str]] = field(
        default_factory=lambda: [
            ("https://example.com/weather", "Weather today"),
            ("https://example.org/forecast", "Forecast"),
        ]
    )  # (url, title)


@dataclass
class Stop:
    # stop | length | toolUse | refusal | pause | safety | malformed_call | blocked (the vendor's safety filter
    # blocked the prompt: nothing is answered; Gemini's promptFeedback.blockReason)
    reason: str = "stop"
    output: int = 0


@dataclass
class ErrorEvent:
    type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class Truncate:
    """End the body cleanly without the vendor's terminal event."""


@dataclass
class Reset:
    """Abort the connection mid-body (the client sees an incomplete chunked body)."""


@dataclass
class Hang:
    """Stop sending and keep the connection open until the client leaves."""


@dataclass
class UnknownEvent:
    """An event type no client knows yet; a gateway must skip it."""


@dataclass
class HttpError:
    status: int
    type: str = "api_error"
    message: str = "simulated failure"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class HangBeforeHeaders:
    """Never send the response headers."""


Step = Union[
    Usage,
    TextBlock,
    ThinkingBlock,
    RedactedThinking,
    ToolCallBlock,
    Stop,
    ErrorEvent,
    Truncate,
    Reset,
    Hang,
    UnknownEvent,
    WebSearch,
]


@dataclass
class Scenario:
    name: str
    steps: list[Step] = field(default_factory=list)
    late: list[Step] = field(default_factory=list)  # frames sent after the terminal event
    http_error: HttpError | None = None
    hang_before_headers: bool = False
    delay_ms: float = 0.0  # pause between frames
    replay: str | None = None
    # The model signs its calls and wants each signature back on the next turn, as Gemini 3 does (a request that
    # replays a call without it is a 400 on Gemini: `simulator.google.request_error`).
    signed_calls: bool = False
    # The model thinks with a signature before its calls and wants that signed thinking block back before each
    # replayed call, as Anthropic does in a tool loop with thinking on (`simulator.anthropic.request_error`).
    signed_thinking: bool = False


def _words(text: str, per_chunk: int = 2) -> list[str]:
    words = text.split(" ")
    return [
        " ".join(words[i : i + per_chunk]) + (" " if i + per_chunk < len(words) else "")
        for i in range(0, len(words), per_chunk)
    ]


def _int(params: dict[str, str], key: str, default: int) -> int:
    try:
        return int(params.get(key, default))
    except ValueError:
        return default


WEATHER_FRAGMENTS = ['{"ci', 'ty": "Pa', 'ris", "unit', '": "celsius"}']
TIME_FRAGMENTS = ['{"timez', 'one": "Europe/', 'Paris"}']


def build(model: str, prompt: str, tool_results: list[str] | None = None) -> Scenario:
    """The scenario a model id names. `tool_results`: the texts of the tool results that end the conversation
    (empty when its latest turn answers no tool call), which the scenarios of `AGENT_SCENARIOS` answer."""
    name, *raw = model.split(";")
    params = dict(p.split("=", 1) for p in raw if "=" in p)
    delay = float(params.get("delay_ms", 0))
    usage = Usage(
        input=_int(params, "input", 25),
        cache_read=_int(params, "cache_read", 0),
        cache_write=_int(params, "cache_write", 0),
        cache_write_1h=_int(params, "cache_write_1h", 0),
    )
    reply = _words(f"Hello from the simulator. You said: {prompt[:200]}" if prompt else "Hello from the simulator.")
    text = TextBlock(reply)
    stop = Stop("stop", output=len(reply) + 3)

    if name.startswith("replay-"):
        return Scenario(name, replay=name[len("replay-") :], delay_ms=delay)
    if name in AGENT_SCENARIOS:
        scenario = AGENT_SCENARIOS[name](usage, tool_results or [])
        scenario.name = name
        scenario.delay_ms = delay
        return scenario
    factory = SCENARIOS.get(name)
    if factory is None:
        return Scenario("text", [usage, text, stop], delay_ms=delay)
    scenario = factory(params, usage, text, stop)
    scenario.name = name
    scenario.delay_ms = delay or scenario.delay_ms
    return scenario


def declared_tools(body: dict[str, Any]) -> set[str]:
    """The names of the function tools a request declares, in any vendor's shape: Anthropic's and OpenAI
    Responses' `{name}`, Chat Completions' `{function: {name}}`, Gemini's `{functionDeclarations: [{name}]}`."""
    names: set[str] = set()
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
        elif isinstance(tool.get("name"), str):
            names.add(tool["name"])
        for declaration in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                names.add(declaration["name"])
    return names


def only_declared_tools(scenario: Scenario, declared: set[str]) -> None:
    """Drop the scenario's tool calls the request did not declare (a model calls only the tools it was given).
    When none is left, the turn ends with a text that says which tools the scenario would call."""
    calls = [step for step in scenario.steps if isinstance(step, ToolCallBlock)]
    kept = [call for call in calls if call.name in declared]
    if len(kept) == len(calls):
        return
    scenario.steps = [step for step in scenario.steps if not isinstance(step, ToolCallBlock) or step in kept]
    if kept:
        return
    wanted = " or ".join(dict.fromkeys(call.name for call in calls))
    note = _words(f" (This scenario calls {wanted} when the request declares it as a tool.)")
    at = next((i for i, step in enumerate(scenario.steps) if isinstance(step, Stop)), len(scenario.steps))
    stop = scenario.steps[at] if at < len(scenario.steps) else None
    if isinstance(stop, Stop) and stop.reason == "toolUse":
        scenario.steps[at] = Stop("stop", output=stop.output)
    before = scenario.steps[at - 1] if at > 0 else None
    if isinstance(before, TextBlock):
        before.chunks = [*before.chunks, *note]
    else:
        scenario.steps.insert(at, TextBlock(note))


def _http(status: int, type_: str, message: str) -> Callable[..., Scenario]:
    def factory(params: dict[str, str], usage: Usage, text: TextBlock, stop: Stop) -> Scenario:
        headers = {}
        if "retry_after" in params:
            headers["retry-after"] = params["retry_after"]
        if "retry_after_ms" in params:
            headers["retry-after-ms"] = params["retry_after_ms"]
        return Scenario("", http_error=HttpError(status, type_, message, headers))

    return factory


def _paced(params: dict[str, str], usage: Usage, text: TextBlock, stop: Stop) -> Scenario:
    n = _int(params, "n", 64)
    size = _int(params, "size", 8)
    chunks = [f"{i:0{max(size - 1, 1)}d} "[:size] for i in range(n)]
    return Scenario("", [usage, TextBlock(chunks), Stop("stop", output=n)], delay_ms=float(params.get("delay_ms", 20)))


AGENT_EDIT_FILE = "hello.py"
AGENT_EDIT_CONTENT = 'print("Hello from the simulator")\n'
# Aider's `whole` edit format (its default for a model it does not know): the file's path on a line of its own,
# then the file's whole new content in a fenced block.
AGENT_EDIT_ANSWER = f"Here is the new file:\n\n{AGENT_EDIT_FILE}\n```python\n{AGENT_EDIT_CONTENT}```\n"


SCENARIOS: dict[str, Callable[[dict[str, str], Usage, TextBlock, Stop], Scenario]] = {
    "text": lambda p, u, t, s: Scenario("", [u, t, s]),
    "thinking": lambda p, u, t, s: Scenario(
        "", [u, ThinkingBlock(["The user greets me. ", "I should ", "greet back."], "sig-sim-thinking-42"), t, s]
    ),
    "redacted-thinking": lambda p, u, t, s: Scenario("", [u, RedactedThinking("EncryptedBlob=="), t, s]),
    # The vendor searched the web (its hosted tool) before answering; `web-search-paused`: Anthropic paused its
    # server-tool loop (`pause_turn`) after the search.
    "web-search": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            TextBlock(["Let me ", "search."]),
            WebSearch(),
            TextBlock(["It is ", "sunny today."]),
            Stop("stop", output=30),
        ],
    ),
    "web-search-paused": lambda p, u, t, s: Scenario(
        "", [u, TextBlock(["Searching."]), WebSearch(), Stop("pause", output=9)]
    ),
    "tools": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            TextBlock(["Let me ", "check."]),
            ToolCallBlock("toolu_sim_weather", "get_weather", WEATHER_FRAGMENTS),
            ToolCallBlock("toolu_sim_time", "get_time", TIME_FRAGMENTS),
            Stop("toolUse", output=40),
        ],
    ),
    "tool-empty-args": lambda p, u, t, s: Scenario(
        "", [u, ToolCallBlock("toolu_sim_noargs", "get_version", []), Stop("toolUse", 5)]
    ),
    # The call's chunk, then the finish in a later chunk of its own (an empty text part, as Gemini 3 sends).
    "tool-stop-later": lambda p, u, t, s: Scenario(
        "",
        [u, ToolCallBlock("toolu_sim_weather", "get_weather", WEATHER_FRAGMENTS), TextBlock([""]), Stop("toolUse", 8)],
    ),
    "tools-malformed": lambda p, u, t, s: Scenario(
        "", [u, ToolCallBlock("toolu_sim_bad", "get_weather", ['{"city": "Par', 'is", "unit": ']), Stop("toolUse", 9)]
    ),
    "error-mid-stream": lambda p, u, t, s: Scenario("", [u, TextBlock(t.chunks[:2]), ErrorEvent()]),
    "error-before-content": lambda p, u, t, s: Scenario("", [u, ErrorEvent()]),
    "http-429": _http(429, "rate_limit_error", "simulated rate limit"),
    "http-500": _http(500, "api_error", "simulated internal error"),
    "http-529": _http(529, "overloaded_error", "simulated overload"),
    "http-400": _http(400, "invalid_request_error", "simulated bad request"),
    "http-401": _http(401, "authentication_error", "simulated bad key"),
    "truncated": lambda p, u, t, s: Scenario("", [u, TextBlock(t.chunks[:2]), Truncate()]),
    "reset": lambda p, u, t, s: Scenario("", [u, TextBlock(t.chunks[:2]), Reset()]),
    "slow": _paced,
    "late-frames": lambda p, u, t, s: Scenario("", [u, t, s], late=[TextBlock(["late ", "frame"]), Stop("stop")]),
    "hang": lambda p, u, t, s: Scenario("", [u, Hang()]),
    "hang-mid-stream": lambda p, u, t, s: Scenario("", [u, TextBlock(t.chunks[:2]), Hang()]),
    "hang-before-headers": lambda p, u, t, s: Scenario("", hang_before_headers=True),
    "max-tokens": lambda p, u, t, s: Scenario("", [u, t, Stop("length", s.output)]),
    "refusal": lambda p, u, t, s: Scenario("", [u, TextBlock(["I can't ", "help with that."]), Stop("refusal", 6)]),
    "safety": lambda p, u, t, s: Scenario("", [u, TextBlock(["Partial "]), Stop("safety", 2)]),
    # The prompt is blocked before any content: Anthropic stop_reason refusal, OpenAI incomplete
    # content_filter, Gemini promptFeedback.blockReason SAFETY, Chat Completions finish_reason content_filter.
    "blocked": lambda p, u, t, s: Scenario("", [u, Stop("blocked", 0)]),
    "malformed-call": lambda p, u, t, s: Scenario("", [u, Stop("malformed_call", 0)]),
    "pause-turn": lambda p, u, t, s: Scenario("", [u, t, Stop("pause", s.output)]),
    "unknown-event": lambda p, u, t, s: Scenario("", [u, UnknownEvent(), t, s]),
    "args-only-done": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            ToolCallBlock("call_sim_weather", "get_weather", WEATHER_FRAGMENTS, whole="done"),
            ToolCallBlock("call_sim_time", "get_time", TIME_FRAGMENTS, whole="item"),
            Stop("toolUse", output=30),
        ],
    ),
    "incomplete": lambda p, u, t, s: Scenario("", [u, TextBlock(t.chunks[:2]), Stop("length", 4)]),
    # max_tokens reached inside a tool call's arguments: the message ends (length) with the call still open.
    "tool-max-tokens": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            TextBlock(["Let me ", "check."]),
            ToolCallBlock("toolu_sim_weather", "get_weather", ['{"city": "Pa', 'ris", "un'], cut=True),
            Stop("length", output=20),
        ],
    ),
    # Two calls, the token limit reached inside the second one's arguments: the first call is whole.
    "tool-max-tokens-second": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            ToolCallBlock("toolu_sim_weather", "get_weather", WEATHER_FRAGMENTS),
            ToolCallBlock("toolu_sim_time", "get_time", ['{"timez', 'one": "Eur'], cut=True),
            Stop("length", output=30),
        ],
    ),
    # Emoji cut between events inside their UTF-16 surrogate pair (a high surrogate ends one delta, its low
    # surrogate starts the next), plus halves that never pair: a lone high before other text, a lone low,
    # and a high surrogate that ends the block.
    "split-surrogates": lambda p, u, t, s: Scenario(
        "",
        [
            u,
            ThinkingBlock(["Hmm \ud83e", "\udd14 let me see"]),
            TextBlock(["Smile \ud83d", "\ude00 lone \ud83d", " and \ude00low end \ud83d"]),
            ToolCallBlock("toolu_sim_face", "show_face", ['{"face": "\ud83d', '\ude00"}']),
            Stop("toolUse", output=12),
        ],
    ),
    # Aider's edit (Aider edits files from its answer's text, it calls no tools): a whole-file edit block that
    # creates `AGENT_EDIT_FILE`, streamed across frames.
    "agent-edit": lambda p, u, t, s: Scenario("", [u, TextBlock(_words(AGENT_EDIT_ANSWER)), Stop("stop", output=16)]),
}


# A coding agent's tool round trip (a Claude Code-shaped client runs its `Bash` tool): the first turn calls
# `Bash` with `cat proof.txt`, the turn that carries its result answers with that result's text.
AGENT_COMMAND = "cat proof.txt"
AGENT_EXEC_SIGNATURE = "sig-sim-exec-7"


def _agent_tool(usage: Usage, results: list[str], tool: str = "Bash") -> Scenario:
    if results:
        reply = TextBlock(_words("The tool said: " + " ".join(r.strip() for r in results)))
        return Scenario("", [usage, reply, Stop("stop", output=len(reply.chunks))])
    whole = json.dumps({"command": AGENT_COMMAND, "description": "Show the proof file"})
    arguments = [whole[:15], whole[15:40], whole[40:]]
    return Scenario(
        "",
        [
            usage,
            TextBlock(["Let me ", "look."]),
            ToolCallBlock("toolu_sim_bash", tool, arguments),
            Stop("toolUse", output=20),
        ],
    )


def _agent_exec(usage: Usage, results: list[str]) -> Scenario:
    """The same round trip shaped for the Codex CLI, whose shell tool is `exec_command` (`{"cmd": …}`), with a
    signed thinking block before the call (the CLI sends the reasoning back with the call); the result text
    carries the CLI's own header lines before the command's output."""
    if results:
        reply = TextBlock(_words("The tool said: " + " ".join(r.strip() for r in results)))
        return Scenario("", [usage, reply, Stop("stop", output=len(reply.chunks))])
    whole = json.dumps({"cmd": AGENT_COMMAND})
    arguments = [whole[:9], whole[9:]]
    thinking = ThinkingBlock(["I will read ", "the proof file."], AGENT_EXEC_SIGNATURE)
    return Scenario(
        "", [usage, thinking, ToolCallBlock("toolu_sim_exec", "exec_command", arguments), Stop("toolUse", output=12)]
    )


# `signed-tools`: one call signed on its own (Gemini's thoughtSignature on the functionCall part); the turn that
# answers it must carry the call with that signature back (Gemini: 400 otherwise), then the model answers with
# the result's text.
SIGNED_CALL_SIGNATURE = "sig-sim-call-7"


def _signed_tools(usage: Usage, results: list[str]) -> Scenario:
    if results:
        reply = TextBlock(_words("The tool said: " + " ".join(r.strip() for r in results)))
        return Scenario("", [usage, reply, Stop("stop", output=len(reply.chunks))], signed_calls=True)
    call = ToolCallBlock("toolu_sim_weather", "get_weather", WEATHER_FRAGMENTS, signature=SIGNED_CALL_SIGNATURE)
    return Scenario("", [usage, call, Stop("toolUse", output=8)], signed_calls=True)


# `agent-parallel`: two calls of the agent's shell tool in one answer, twice (the second answer after both
# results; the final one after results that start with `again`, the second pair's files, names those), as
# Gemini 2.5 sends them: each call in a chunk of its own,
# the first signed on its own (`thoughtSignature` on its functionCall part), the finish on the second. The
# vendor numbers its calls per answer, so the second answer repeats the first one's ids (`toolu_sim_bash_1`,
# `_2`); on Gemini the calls carry no id (Gemini 2.x), in `agent-parallel-ids` they carry these (Gemini 3).
AGENT_PARALLEL_COMMANDS = (("cat proof.txt", "cat proof2.txt"), ("cat proof3.txt", "cat proof4.txt"))


def _agent_parallel(usage: Usage, results: list[str], gemini_ids: bool = False) -> Scenario:
    if any(r.startswith("again") for r in results):
        reply = TextBlock(_words("The tools said: " + " ".join(r.strip() for r in results)))
        return Scenario("", [usage, reply, Stop("stop", output=len(reply.chunks))])
    commands = AGENT_PARALLEL_COMMANDS[1 if results else 0]
    calls = [
        ToolCallBlock(f"toolu_sim_bash_{index}", "Bash",
                      [json.dumps({"command": command, "description": f"Show proof file {index}"})],
                      signature=SIGNED_CALL_SIGNATURE if index == 1 else None, gemini_id=gemini_ids)
        for index, command in enumerate(commands, start=1)
    ]  # fmt: skip
    return Scenario("", [usage, *calls, Stop("toolUse", output=24)])


def _agent_shell_thinking(usage: Usage, results: list[str]) -> Scenario:
    """`agent-shell` with signed thinking before the call, which the vendor (Anthropic) wants back before the
    call when the result comes."""
    if results:
        reply = TextBlock(_words("The tool said: " + " ".join(r.strip() for r in results)))
        return Scenario("", [usage, reply, Stop("stop", output=len(reply.chunks))], signed_thinking=True)
    whole = json.dumps({"command": AGENT_COMMAND, "description": "Show the proof file"})
    thinking = ThinkingBlock(["I will read ", "the proof file."], AGENT_EXEC_SIGNATURE)
    call = ToolCallBlock("toolu_sim_shell", "run_shell_command", [whole])
    return Scenario("", [usage, thinking, call, Stop("toolUse", output=12)], signed_thinking=True)


# `agent-shell`: the same round trip with Gemini CLI's (and Qwen Code's) shell tool; `agent-bash`: with the
# `bash` tool of pi's coding agent and OpenCode.
AGENT_SCENARIOS: dict[str, Callable[[Usage, list[str]], Scenario]] = {
    "agent-tool": _agent_tool,
    "agent-exec": _agent_exec,
    "agent-shell": lambda usage, results: _agent_tool(usage, results, "run_shell_command"),
    "agent-bash": lambda usage, results: _agent_tool(usage, results, "bash"),
    "signed-tools": _signed_tools,
    "agent-parallel": _agent_parallel,
    "agent-parallel-ids": lambda usage, results: _agent_parallel(usage, results, gemini_ids=True),
    "agent-shell-thinking": _agent_shell_thinking,
}


def token_count(body: dict[str, Any]) -> int:
    """The simulated vendors' token count for a counting request: one token per four characters of the body's
    canonical JSON (rounded up, at least 1). Deterministic, so a test can check that the gateway answered with
    the vendor's own number (`simulator.app` serves it on each vendor's counting endpoint)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return max(1, -(-len(text) // 4))


def summary(scenario: Scenario) -> dict[str, Any]:
    return {"name": scenario.name, "replay": scenario.replay, "delayMs": scenario.delay_ms}
