"""Decode an OpenAI Responses request (`POST /v1/responses`) into the unified request.

Each request field is honoured (mapped onto the unified request), accepted and ignored where ignoring it
cannot change the answer (listed in docs/doors/openai-responses.md), or refused with a 400 in OpenAI's error
shape naming it in `param`. `FIELDS` below is the source of truth in code.

`input` (a string or a list of items) is read by `conversation.py`, after the stored conversation a body
continues. Stored responses (`store`, the API's default): `wanted(body)` (`stored.py`) names the stored
responses a body builds on (`previous_response_id`, and those an `item_reference`'s id belongs to); the HTTP glue
loads the key's own and passes them to `decode`, which reads the continued conversation before `input` and
resolves references; the decoded request's `items` are the conversation so far as wire items, which the glue
keeps with the output.

Hosted tools are never refused: `web_search` becomes `options.hostedTools.webSearch`, which the serving
vendor's own search runs where the catalog allows it (`app.providers.hosted`; else the turn names it dropped);
the others (`file_search`, …) and other non-function tools the door drops and names in the
`X-Gateway-Dropped-Tools` response header. The functions of a `namespace`
group go to the vendor as `<namespace>__<name>`; `namespaced` maps them back for the encoder's function_call
items, which carry the `namespace`.

A `compaction_trigger` as the last input item asks for remote compaction (`compaction.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from app.contract.messages import DOOR_VALIDATION, Context, Tool, UserMessage
from app.contract.request import HostedToolsOption, Reasoning, StreamOptions, StreamRequest, ToolChoiceTool, WebSearch
from app.doors.base import DROPPED_TOOLS_HEADER, DoorRequest, StoredResponse
from app.doors.fields import bool_or, integer_at, invalid, kind, list_at, number_at, object_at, string_at, unsupported
from app.doors.openai_fields import accept_default, metadata, refuse, session_id, stream_options
from app.doors.openai_responses import compaction
from app.doors.openai_responses.conversation import NAMESPACE_SEPARATOR, Conversation
from app.doors.openai_responses.stored import response_not_found, wanted
from app.doors.structured_output import JSON_OBJECT, structured_output
from app.doors.validation import ANY_INDEX

# Where a person's text lives in a Responses body (not in reasoning items, whose text may be signed).
PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("instructions",),
    ("input",),
    ("input", ANY_INDEX, "content"),
    ("input", ANY_INDEX, "content", ANY_INDEX, "text"),
    ("input", ANY_INDEX, "output"),
    ("input", ANY_INDEX, "output", ANY_INDEX, "text"),
)
ENCRYPTED_REASONING = "reasoning.encrypted_content"
SEARCH_SOURCES = "web_search_call.action.sources"
# `reasoning.effort` → the unified level; "none" turns reasoning off.
EFFORTS: dict[str, Reasoning | None] = {
    "none": None, "minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh",
}  # fmt: skip
SUMMARIES = ("auto", "concise", "detailed")
MAX_TOKENS = 1_000_000
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_NAMESPACE = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True, slots=True)
class ResponsesRequest(DoorRequest):
    """The decoded request and what the encoder needs to echo it in the `response` object."""

    client_model: str = ""
    include_encrypted_reasoning: bool = False  # `include: ["reasoning.encrypted_content"]`
    include_search_sources: bool = False  # `include: ["web_search_call.action.sources"]`
    echo: dict[str, Any] = field(default_factory=dict)  # request fields the `response` object repeats
    store: bool = True  # keep the response for later requests (the API's default)
    # The conversation as wire items: the stored one it continues, then `input` with references resolved.
    items: list[dict[str, Any]] = field(default_factory=list)
    # `input` ended with a `compaction_trigger`: the turn asks the model for a summary, answered as one
    # `compaction` item (`app.doors.openai_responses.compaction`).
    compaction: bool = False
    # `POST /v1/responses/compact`: the user messages of input, which its answer lists before the compaction item.
    compacted: list[dict[str, Any]] | None = None
    # The vendor-side names of namespaced functions (`<namespace>__<name>`) → (namespace, name).
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- fields


def ignore_typed(*kinds: type) -> Callable[[str, Any], None]:
    """Accepted and ignored (it cannot change the answer), but only as the type the API gives it: a wrong type
    is a client's bug that ignoring would hide."""

    def check(param: str, value: Any) -> None:
        if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise invalid(param, f"must be {' or '.join(kind(k()) for k in kinds)}, not {kind(value)}")

    return check


# Fields mapped onto the unified request are listed with None; the rest are checked here.
FIELDS: dict[str, Callable[[str, Any], None] | None] = {
    "model": None,
    "input": None,
    "instructions": None,
    "tools": None,
    "tool_choice": None,
    "parallel_tool_calls": None,
    "max_output_tokens": None,
    "reasoning": None,
    "text": None,
    "temperature": None,
    "top_p": None,
    "metadata": None,
    "prompt_cache_key": None,
    "include": None,
    "stream": None,
    "stream_options": None,
    "user": None,
    "safety_identifier": None,
    "store": None,  # kept for later requests by the HTTP glue (app/api/stored_responses.py)
    "previous_response_id": None,
    "service_tier": ignore_typed(str),
    "client_metadata": ignore_typed(
        dict
    ),  # the client's own telemetry tags (Codex CLI sends them); never shown to the model
    "truncation": accept_default("disabled", "auto"),
    "prompt_cache_retention": ignore_typed(str),
    "max_tool_calls": ignore_typed(int),  # bounds hosted tool calls: the catalog bounds the vendor's searches instead
    "top_logprobs": accept_default(0),
    "background": accept_default(False),
    "conversation": refuse(
        "server-held conversations are not kept by this gateway: send the whole conversation in input"
    ),
    "prompt": refuse("stored prompt templates are not supported: send instructions and input"),
    "context_management": refuse("server-side compaction is not supported yet"),
}


def decode(
    body: dict[str, Any], headers: Mapping[str, str] | None = None, stored: Mapping[str, StoredResponse] | None = None
) -> ResponsesRequest:
    """`stored`: the stored responses `wanted(body)` named that were found (the key's own, not expired)."""
    try:
        return _decode(body, stored or {})
    except ValidationError as exc:  # a limit of the unified request the checks here did not name first
        first = exc.errors(include_url=False)[0]
        raise invalid(".".join(str(p) for p in first["loc"]), first["msg"]) from None


def _decode(body: dict[str, Any], stored: Mapping[str, StoredResponse]) -> ResponsesRequest:
    for key, value in body.items():
        if key not in FIELDS:
            raise invalid(key, "unrecognized request argument")
        check = FIELDS[key]
        if check is not None:
            check(key, value)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "a model name is required (a string)")
    stream = bool_or(body.get("stream"), "stream", False)
    stream_options(body.get("stream_options"), stream, ("include_obfuscation",))  # none is sent: nothing to pad
    store = bool_or(body.get("store"), "store", True)
    previous, _ = wanted(body)
    parallel = bool_or(body.get("parallel_tool_calls"), "parallel_tool_calls", True)
    include = _include(body.get("include"))
    tools, dropped, namespaced = _tools(body.get("tools"))
    # A web search goes to the adapters as `options.hostedTools`: the serving vendor's own search runs it where
    # the catalog allows, else the turn names it dropped (app.providers.hosted).
    web_search = _web_search(body.get("tools"))
    dropped = [kind for kind in dropped if kind not in WEB_SEARCH_TYPES]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("instructions", "must be a string")
    conversation = Conversation(stored, namespaced)
    if previous is not None:
        if previous not in stored:
            raise response_not_found("previous_response_id", previous)
        conversation.read_stored(stored[previous].items)
    conversation.read(body.get("input"))
    if conversation.compaction:  # the model summarizes the conversation; it calls no tool for it
        conversation.messages.append(UserMessage(content=compaction.PROMPT))
    system = "\n\n".join(s for s in ([instructions or ""] + conversation.system) if s) or None
    options = _options(body, tools)
    if conversation.compaction and tools:
        options = options.model_copy(update={"tool_choice": "none"})
    if web_search is not None and not conversation.compaction:
        options = options.model_copy(update={"hosted_tools": HostedToolsOption(web_search=web_search)})
    context = Context.model_validate(
        {"system_prompt": system, "messages": conversation.messages, "tools": tools or None}, context=DOOR_VALIDATION
    )
    unified = StreamRequest(model=model, context=context, options=options)
    echo = {
        "instructions": instructions,
        "max_output_tokens": options.max_tokens,
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": parallel,
        "prompt_cache_key": options.session_id,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": store,
        "previous_response_id": previous,
        "temperature": options.temperature,
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"],
        "top_p": options.top_p,
    }
    return ResponsesRequest(
        unified=unified,
        stream=stream,
        response_headers={DROPPED_TOOLS_HEADER: ", ".join(dropped)} if dropped else None,
        client_model=model,
        include_encrypted_reasoning=ENCRYPTED_REASONING in include,
        include_search_sources=SEARCH_SOURCES in include,
        echo=echo,
        store=store,
        items=conversation.items,
        compaction=conversation.compaction,
        namespaced=namespaced,
    )


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    return None if body.get(key) is None else number_at(body[key], key, low, high)


def _include(value: Any) -> list[str]:
    if value is None:
        return []
    items = list_at(value, "include")
    for i, item in enumerate(items):
        string_at(item, f"include.{i}", max_length=512)
        if item == "message.output_text.logprobs":
            raise unsupported(f"include.{i}", "log probabilities are not offered across vendors")
    return items


# ---------------------------------------------------------------------------------------------- options


def _options(body: dict[str, Any], tools: list[Tool]) -> StreamOptions:
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None:
        integer_at(max_tokens, "max_output_tokens", 1, MAX_TOKENS)
    json_schema = _json_schema(body.get("text"))
    return StreamOptions.model_validate(
        {
            "max_tokens": max_tokens,
            "temperature": _number(body, "temperature", 0, 2),
            "top_p": _number(body, "top_p", 0, 1),
            "reasoning": _reasoning(body.get("reasoning")),
            "tool_choice": _tool_choice(body.get("tool_choice"), tools),
            "metadata": metadata(body),
            "session_id": session_id(body),
            # Only `false` is carried: the vendors' default is parallel calls.
            "parallel_tool_calls": False if body.get("parallel_tool_calls") is False else None,
            **structured_output(json_schema),
        },
        context=DOOR_VALIDATION,
    )


def _reasoning(value: Any) -> Reasoning | None:
    if value is None:
        return None
    reasoning = object_at(value, "reasoning")
    for key in reasoning:
        if key not in ("effort", "summary", "generate_summary"):
            raise invalid(f"reasoning.{key}", "unrecognized reasoning option")
    for key in ("summary", "generate_summary"):
        summary = reasoning.get(key)
        if summary is not None and summary not in SUMMARIES:
            raise invalid(f"reasoning.{key}", f"must be one of {', '.join(SUMMARIES)}")
    effort = reasoning.get("effort")
    if effort is None:
        return None
    if not isinstance(effort, str) or effort not in EFFORTS:
        raise invalid("reasoning.effort", f"must be one of {', '.join(EFFORTS)}")
    return EFFORTS[effort]


def _json_schema(value: Any) -> dict[str, Any] | None:
    """`text.format`: `text` (the default), `json_object` (JSON mode, `JSON_OBJECT`) or `json_schema`, whose schema
    every vendor's structured output gets."""
    if value is None:
        return None
    text = object_at(value, "text")
    for key in text:
        if key not in ("format", "verbosity"):
            raise invalid(f"text.{key}", "unrecognized text option")
    verbosity = text.get("verbosity")
    if verbosity is not None and verbosity not in ("low", "medium", "high"):
        raise invalid("text.verbosity", "must be one of low, medium, high")
    if text.get("format") is None:
        return None
    form = object_at(text["format"], "text.format")
    kind = form.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT  # JSON mode (the unified jsonObject), which a vendor without it refuses
    if kind != "json_schema":
        raise invalid("text.format.type", "must be text, json_object or json_schema")
    if form.get("name") is not None:
        string_at(form["name"], "text.format.name", max_length=64)
    return object_at(form.get("schema"), "text.format.schema")


def _tool_choice(value: Any, tools: list[Tool]) -> str | ToolChoiceTool | None:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        if value == "required" and not tools:
            raise invalid("tool_choice", '"required" needs function tools')
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.name", "must name a function tool")
        if name not in {t.name for t in tools}:
            raise invalid("tool_choice.name", f"no function tool named {name!r} in tools")
        return ToolChoiceTool(type="tool", name=name)
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        raise unsupported(
            "tool_choice.type", f"{value['type']!r} is not supported: choose auto, none, required or a function"
        )
    raise invalid("tool_choice", 'must be "auto", "none", "required" or {"type": "function", "name"}')


WEB_SEARCH_TYPES = ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11")


def _web_search(value: Any) -> WebSearch | None:
    """The web search tool of `tools`, if there is one (its `filters`, `user_location` and
    `search_context_size` are not carried: docs/adapters/web-search.md)."""
    for i, tool in enumerate(value if isinstance(value, list) else ()):
        if isinstance(tool, dict) and tool.get("type") in WEB_SEARCH_TYPES:
            live = bool_or(tool.get("external_web_access"), f"tools.{i}.external_web_access", True)
            return WebSearch(external_web_access=live)
    return None


def _tools(value: Any) -> tuple[list[Tool], list[str], dict[str, tuple[str, str]]]:
    """The function tools, the types of the other tools (hosted ones), which are dropped, and the functions of
    `namespace` groups: each goes to the vendor as a function tool named `<namespace>__<name>` (a name every
    vendor takes), mapped here to its namespace and name, which the function_call items carry."""
    if value is None:
        return [], [], {}
    tools: list[Tool] = []
    dropped: list[str] = []
    namespaced: dict[str, tuple[str, str]] = {}
    names: set[str] = set()

    def function(tool: dict[str, Any], param: str, namespace: str | None, group: str = "") -> None:
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise invalid(f"{param}.name", "must be 1-128 letters, digits, _ . : or -")
        flat = name if namespace is None else f"{namespace}{NAMESPACE_SEPARATOR}{name}"
        if flat in names:
            raise invalid(f"{param}.name", f"tool {flat!r} is defined twice")
        names.add(flat)
        if namespace is not None:
            namespaced[flat] = (namespace, name)
        description = tool.get("description")
        if description is not None:
            string_at(description, f"{param}.description", max_length=100_000)
        parameters = tool.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        elif not isinstance(parameters, dict):
            raise invalid(f"{param}.parameters", "must be a JSON Schema object")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise invalid(f"{param}.strict", "must be a boolean")
        # A group's description (what its functions are for) comes before each of its functions' own.
        description = "\n\n".join(d for d in (group, description or "") if d)
        tools.append(Tool(name=flat, description=description, parameters=parameters))

    def drop(kind: str) -> None:
        if kind not in dropped:
            dropped.append(kind)

    for i, raw in enumerate(list_at(value, "tools")):
        param = f"tools.{i}"
        tool = object_at(raw, param)
        kind = string_at(tool.get("type"), f"{param}.type", max_length=128, empty=False)
        if kind == "function":
            function(tool, param, None)
        elif kind == "namespace":
            namespace = tool.get("name")
            if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
                raise invalid(f"{param}.name", "must be 1-64 letters, digits or _")
            group = tool.get("description")
            group = string_at(group, f"{param}.description", max_length=100_000) if group is not None else ""
            for j, raw_inner in enumerate(list_at(tool.get("tools"), f"{param}.tools")):
                inner = object_at(raw_inner, f"{param}.tools.{j}")
                inner_kind = string_at(inner.get("type"), f"{param}.tools.{j}.type", max_length=128, empty=False)
                if inner_kind == "function":
                    function(inner, f"{param}.tools.{j}", namespace, group)
                else:
                    drop(f"{namespace}.{inner_kind}")
        else:
            drop(kind)
    return tools, dropped, namespaced
