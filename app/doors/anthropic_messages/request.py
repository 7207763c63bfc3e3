"""Decode an Anthropic Messages request body (`POST /v1/messages`) into the unified `StreamRequest`.

Pure: a JSON object in, a `DoorRequest` out, or a `BadRequest` whose message starts with the field at fault. Everything
the gateway cannot honour for every vendor it fronts (URL images, documents, prefill, `top_k`, …) is refused
here, before any upstream call. Server tools are never refused: a `web_search_…` tool becomes
`options.hostedTools.webSearch` (the serving vendor's own search where the catalog allows it, else named dropped:
`app.providers.hosted`); the others (`web_fetch_…`, `code_execution_…`, `bash_…`, …) are dropped here and named
in the `X-Gateway-Dropped-Tools` response header. What only Anthropic understands travels in the unified request's
door-only fields for the Anthropic adapter to send as it came (system messages inside the conversation,
`cache_control` breakpoints, tool definitions with `defer_loading`, `thinking`, `output_config`,
`context_management`, the `anthropic-beta` flags); the unified fields carry its translation for the other
vendors. docs/doors/anthropic-messages.md lists every field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

import orjson
from pydantic import ValidationError

from app.contract.messages import DOOR_VALIDATION, AssistantMessage, Context, SystemMessage, TextContent, Tool
from app.contract.request import HostedToolsOption, Reasoning, StreamOptions, StreamRequest, ToolChoiceTool, WebSearch
from app.doors.anthropic_messages.conversation import (
    Conversation, cache_control, clear_thinking, expire_system_messages, system_blocks,
)  # fmt: skip
from app.doors.base import DROPPED_TOOLS_HEADER, DoorRequest
from app.doors.errors import BadRequest
from app.doors.fields import bool_at, fail, integer_at, list_at, number_at, object_at, string_at

# `thinking.budget_tokens` → the unified reasoning level: the highest level whose budget the request reaches.
# These are the budgets the Anthropic adapter sends for each level, so a budget of exactly one of them
# reaches an Anthropic model unchanged.
BUDGET_LEVELS: tuple[tuple[int, Reasoning], ...] = (
    (32768, "xhigh"),
    (16384, "high"),
    (8192, "medium"),
    (2048, "low"),
    (0, "minimal"),
)
ADAPTIVE_LEVEL: Reasoning = "medium"
# The unified request's bounds (`app.contract.request.StreamOptions`), checked here to name Anthropic's fields.
MAX_TOKENS = 1_000_000
MAX_STOP, MAX_STOP_LENGTH = 16, 1000
EFFORT_LEVELS: dict[str, Reasoning] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}
# Top-level fields that would change the answer and that the gateway cannot honour on every vendor.
UNSUPPORTED_FIELDS = {
    "top_k": "top_k is not supported by the gateway (not every vendor has it)",
    "container": "code-execution containers are Anthropic server features the gateway does not offer",
    "mcp_servers": "MCP servers are an Anthropic server feature the gateway does not offer",
    "compaction": "compaction requests are an Anthropic server feature the gateway does not offer",
    "thread": "server-held conversation threads are an Anthropic feature the gateway does not offer",
}
# Top-level fields an Anthropic upstream gets as they came (`options.passthrough`, under `PASSTHROUGH_API`); the
# other vendors get their translation (thinking, effort) or nothing where nothing changes in the answer
# (docs/doors/anthropic-messages.md).
ANTHROPIC_ONLY_FIELDS = (
    "thinking",
    "output_config",
    "context_management",
    "cache_control",
    "service_tier",
    "speed",
    "inference_geo",
)
PASSTHROUGH_API = "anthropic-messages"  # the api whose adapter sends them as they came
# `context_management` edits (docs/doors/anthropic-messages.md): Anthropic applies them itself; for the other
# vendors the door applies `clear_thinking` (old thinking left out of the history, the last `keep` assistant
# turns with thinking keep theirs; Anthropic's default keeps one).
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_THINKING_TURNS_KEPT = 1


# ----------------------------------------------------------------------------- tools and options


WEB_SEARCH_PREFIX = "web_search_"  # Anthropic's dated web search server tools (`web_search_20250305`, …)


@dataclass(frozen=True, slots=True)
class Tools:
    """The tools of a Messages body: the custom ones, the web search asked for, the server tools dropped."""

    custom: list[Tool]
    web_search: WebSearch | None
    dropped: list[str]


def _tools(value: Any, loaded: set[str]) -> Tools:
    """Custom tools; each keeps its Anthropic definition as sent (`defer_loading`, `cache_control`, `strict`,
    …) for an Anthropic upstream. A `defer_loading` tool no `tool_reference` has loaded is `deferred`. A web search
    server tool is the hosted web search (its `max_uses`, domains and location are not carried: the catalog bounds
    the searches); every other server tool is dropped, named by its `type`."""
    tools: list[Tool] = []
    web_search: WebSearch | None = None
    dropped: list[str] = []
    names: set[str] = set()
    for index, raw in enumerate(list_at(value, "tools")):
        path = f"tools.{index}"
        tool = object_at(raw, path)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            kind = string_at(kind, f"{path}.type", empty=False)
            if kind.startswith(WEB_SEARCH_PREFIX):
                web_search = WebSearch()
            elif kind not in dropped:
                dropped.append(kind)
            continue
        name = string_at(tool.get("name"), f"{path}.name", empty=False)
        if len(name) > 128:
            fail(f"{path}.name", "must be at most 128 characters")
        if name in names:
            fail(f"{path}.name", f"tool {name!r} is defined twice")
        names.add(name)
        schema = object_at(tool.get("input_schema"), f"{path}.input_schema")
        description = tool.get("description")
        cache_control(tool, path)
        deferred = bool_at(tool.get("defer_loading", False), f"{path}.defer_loading") and name not in loaded
        tools.append(
            Tool.model_validate(
                {
                    "name": name,
                    "description": "" if description is None else string_at(description, f"{path}.description"),
                    "parameters": schema,
                    "deferred": deferred,
                    "anthropic": tool,
                },
                context=DOOR_VALIDATION,
            )
        )
    return Tools(tools, web_search, dropped)


NO_TOOLS = Tools([], None, [])


def _tool_choice(value: Any, tools: list[Tool]) -> str | ToolChoiceTool:
    choice = object_at(value, "tool_choice")
    if choice.get("disable_parallel_tool_use") is not None:
        bool_at(choice["disable_parallel_tool_use"], "tool_choice.disable_parallel_tool_use")
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "none":
        return "none"
    if kind not in ("any", "tool"):
        fail("tool_choice.type", f"must be 'auto', 'any', 'tool' or 'none', not {kind!r}")
    if not tools:
        fail("tool_choice", f"type {kind!r} needs tools")
    if kind == "any":
        return "required"
    name = string_at(choice.get("name"), "tool_choice.name", empty=False)
    if name not in {t.name for t in tools}:
        fail("tool_choice.name", f"names no tool in tools: {name!r}")
    return ToolChoiceTool(type="tool", name=name)


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    effort: Reasoning | None = None
    if body.get("output_config") is not None:
        config = object_at(body["output_config"], "output_config")
        if config.get("effort") is not None:
            raw = config["effort"]
            if raw not in EFFORT_LEVELS:
                fail("output_config.effort", f"must be one of {', '.join(EFFORT_LEVELS)}")
            effort = EFFORT_LEVELS[raw]
    if body.get("thinking") is None:
        return effort
    thinking = object_at(body["thinking"], "thinking")
    if thinking.get("display") not in (None, "summarized", "omitted", "updates"):
        fail("thinking.display", "must be 'summarized', 'omitted' or 'updates'")
    kind = thinking.get("type")
    if kind == "disabled":
        return None
    if kind == "adaptive":
        return effort or ADAPTIVE_LEVEL
    if kind != "enabled":
        fail("thinking.type", f"must be 'enabled', 'adaptive' or 'disabled', not {kind!r}")
    budget = integer_at(thinking.get("budget_tokens"), "thinking.budget_tokens", 1024)
    if effort is not None:
        return effort
    return next(level for floor, level in BUDGET_LEVELS if budget >= floor)


def _betas(headers: Mapping[str, str] | None) -> list[str]:
    raw = (headers or {}).get("anthropic-beta") or ""
    return [flag.strip() for flag in raw.split(",") if flag.strip()]


def _passthrough(body: dict[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The top-level fields (and beta flags) an Anthropic upstream is sent as they came."""
    native: dict[str, Any] = {}
    for field in ANTHROPIC_ONLY_FIELDS:
        if body.get(field) is not None:
            native[field] = body[field]
    if betas := _betas(headers):
        native["betas"] = betas
    return {PASSTHROUGH_API: native} if native else None


def conversation_key(system: list[TextContent], first: Any) -> str:
    """A key that stays the same on every turn of one conversation and differs between conversations: a hash of
    the system prompt and the first message, which a conversation never changes. It becomes
    `options.sessionId`, which OpenAI gets as `prompt_cache_key` (requests with the same key are routed to the
    same prompt cache); an Anthropic client has no such field of its own."""
    digest = hashlib.sha256()
    for block in system:
        digest.update(block.text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(orjson.dumps(first, option=orjson.OPT_SORT_KEYS))
    return "msgs-" + digest.hexdigest()[:32]


def _json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """`output_config.format` (`{type: json_schema, schema}`): the schema every vendor's structured output gets."""
    config = body.get("output_config")
    if not isinstance(config, dict) or config.get("format") is None:
        return None
    form = object_at(config["format"], "output_config.format")
    if form.get("type") != "json_schema":
        fail("output_config.format.type", f"must be 'json_schema', not {form.get('type')!r}")
    return object_at(form.get("schema"), "output_config.format.schema")


def _options(body: dict[str, Any], tools: list[Tool], headers: Mapping[str, str] | None) -> StreamOptions:
    options: dict[str, Any] = {
        "reasoning": _reasoning(body),
        "passthrough": _passthrough(body, headers),
        "json_schema": _json_schema(body),
    }
    if body.get("max_tokens") is None:
        fail("max_tokens", "Field required")  # as Anthropic answers
    options["max_tokens"] = integer_at(body["max_tokens"], "max_tokens", 1)
    if options["max_tokens"] > MAX_TOKENS:
        fail("max_tokens", f"must be at most {MAX_TOKENS}")
    if body.get("temperature") is not None:
        options["temperature"] = number_at(body["temperature"], "temperature", 0.0, 1.0)
    if body.get("top_p") is not None:
        options["top_p"] = number_at(body["top_p"], "top_p", 0.0, 1.0)
    if body.get("stop_sequences") is not None:
        stops = [
            string_at(s, f"stop_sequences.{i}", empty=False)
            for i, s in enumerate(list_at(body["stop_sequences"], "stop_sequences"))
        ]
        if len(stops) > MAX_STOP:
            fail("stop_sequences", f"at most {MAX_STOP} stop sequences are supported")
        for index, stop in enumerate(stops):
            if len(stop) > MAX_STOP_LENGTH:
                fail(f"stop_sequences.{index}", f"must be at most {MAX_STOP_LENGTH} characters")
        options["stop"] = stops or None
    if body.get("tool_choice") is not None:
        options["tool_choice"] = _tool_choice(body["tool_choice"], tools)
        if body["tool_choice"].get("disable_parallel_tool_use") is True:  # one call at a time, as each vendor takes it
            options["parallel_tool_calls"] = False
    if body.get("metadata") is not None:
        metadata = object_at(body["metadata"], "metadata")
        user_id = metadata.get("user_id")
        if user_id is not None:
            options["metadata"] = {"userId": string_at(user_id, "metadata.user_id")}
    return StreamOptions.model_validate(options, context=DOOR_VALIDATION)


def _thinking_turns_kept(body: dict[str, Any]) -> int | None:
    """How many of the latest assistant turns with thinking keep it, when `context_management` asks to clear
    thinking (`clear_thinking_20251015`, `keep: {type: thinking_turns, value}` or `"all"`); None: keep all."""
    if body.get("context_management") is None:
        return None
    edits = object_at(body["context_management"], "context_management").get("edits") or []
    for index, raw in enumerate(list_at(edits, "context_management.edits")):
        path = f"context_management.edits.{index}"
        edit = object_at(raw, path)
        if string_at(edit.get("type"), f"{path}.type") != CLEAR_THINKING:
            continue  # clear_tool_uses: applied by Anthropic; see docs/doors/anthropic-messages.md
        keep = edit.get("keep")
        if keep is None:
            return DEFAULT_THINKING_TURNS_KEPT
        if keep == "all":
            return None
        keep = object_at(keep, f"{path}.keep")
        return integer_at(keep.get("value"), f"{path}.keep.value", 0)
    return None


# ----------------------------------------------------------------------------- the request


def decode(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> DoorRequest:
    """The unified request for an Anthropic Messages body; raises `BadRequest` (400, or 404 for a model name
    that cannot name anything). `anthropic-beta` flags go to an Anthropic upstream; `anthropic-version` changes
    nothing."""
    model = string_at(body.get("model"), "model", empty=False)
    for name, problem in UNSUPPORTED_FIELDS.items():
        if body.get(name) is not None:
            fail(name, problem)
    conversation = Conversation()
    if body.get("system") is not None:
        conversation.system_blocks.extend(system_blocks(body["system"], "system"))
    raw_messages = list_at(body.get("messages"), "messages")
    if not raw_messages:
        fail("messages", "must not be empty")
    for index, message in enumerate(raw_messages):
        conversation.add(message, f"messages.{index}")
    turns = [m for m in conversation.messages if not isinstance(m, SystemMessage)]
    if isinstance(turns[-1] if turns else None, AssistantMessage):
        fail(f"messages.{len(raw_messages) - 1}.role", "a final assistant message (prefill) is not supported")
    if not turns:
        fail("messages", "must contain a user message")
    messages = conversation.messages
    if (kept := _thinking_turns_kept(body)) is not None:
        messages = clear_thinking(messages, kept)
    expire_system_messages(messages)
    declared = _tools(body["tools"], conversation.loaded_tools) if body.get("tools") is not None else NO_TOOLS
    tools = declared.custom
    stream = bool_at(body.get("stream", False), "stream")
    options = _options(body, tools, headers)
    if declared.web_search is not None:
        options.hosted_tools = HostedToolsOption(web_search=declared.web_search)
    system_prompt = conversation.system_blocks
    options.session_id = conversation_key(system_prompt, raw_messages[0])
    system = "\n\n".join(b.text for b in system_prompt if b.text) or None
    try:
        context = Context.model_validate(
            {
                "system_prompt": system,
                "system_blocks": system_prompt or None,
                "messages": messages,
                "tools": tools or None,
            },
            context=DOOR_VALIDATION,
        )
        unified = StreamRequest(model=model, context=context, options=options)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        if where == "model":
            raise BadRequest(404, "not_found_error", f"model: {model!r} names no model", param="model") from None
        raise BadRequest(400, "invalid_request_error", f"{where}: {first['msg']}", param=where) from None
    dropped = {DROPPED_TOOLS_HEADER: ", ".join(declared.dropped)} if declared.dropped else None
    return DoorRequest(unified=unified, stream=stream, response_headers=dropped)
