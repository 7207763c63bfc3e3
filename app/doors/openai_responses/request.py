"""Decode an OpenAI Responses request (`POST /v1/responses`) into the unified request.

Each request field is honoured (mapped onto the unified request), accepted and ignored where ignoring it
cannot change the answer (listed in docs/doors/openai-responses.md), or refused with a 400 in OpenAI's error
shape naming it in `param`. `FIELDS` below is the source of truth in code.

`input` is a string (one user message) or a list of items. Consecutive assistant-side items (`reasoning`, an
assistant `message`, `function_call`) form one unified assistant message; its origin (provider, api, model)
is the one a `reasoning` item's `encrypted_content` carries (`app.doors.openai_responses.reasoning`), so
same-model reasoning returns to its vendor exactly and never reaches another. A `function_call_output` must
answer a `function_call` of an earlier item. `system` / `developer` messages before the conversation join
`instructions` as the system prompt; later ones stay at their position (each adapter sends them as its
vendor's own instruction).

Stored responses (`store`, the API's default): `wanted(body)` names the stored responses a body builds on
(`previous_response_id`, and those an `item_reference`'s id belongs to); the HTTP glue loads the key's own and
passes them to `decode`, which reads the continued conversation before `input` and resolves references; the
decoded request's `items` are the conversation so far as wire items, which the glue keeps with the output.

Hosted tools are never refused: `web_search` becomes `options.hostedTools.webSearch`, which the serving
vendor's own search runs where the catalog allows it (`app.providers.hosted`; else the turn names it dropped);
the others (`file_search`, …) and other non-function tools the door drops and names in the
`X-Gateway-Dropped-Tools` response header. The functions of a `namespace`
group go to the vendor as `<namespace>__<name>`; `namespaced` maps them back for the encoder's function_call
items, which carry the `namespace`.

A `compaction_trigger` as the last input item asks for remote compaction, and a `compaction` item carries a
summary the door made earlier (`app.doors.openai_responses.compaction`).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import orjson
from pydantic import ValidationError

from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import HostedToolsOption, Reasoning, StreamOptions, StreamRequest, ToolChoiceTool, WebSearch
from app.doors.base import DROPPED_TOOLS_HEADER, DoorRequest, StoredResponse
from app.doors.errors import BadRequest
from app.doors.openai_chat.request import accept_default, error_body, invalid, refuse, structured_output, unsupported
from app.doors.openai_chat.request import JSON_OBJECT
from app.doors.openai_responses import compaction
from app.doors.anthropic_messages.signatures import SignedCall, Unwrapped
from app.doors.openai_responses.reasoning import Opaque, Origin, unwrap_reasoning
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
_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.S)
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


def response_not_found(param: str | None, response_id: str) -> BadRequest:
    """The 404 for a stored response that is not there (another key's, expired, deleted or never stored), in
    OpenAI's words; `error_body` makes the type `invalid_request_error` and the code the kind given here."""
    if param is None:  # GET / DELETE /v1/responses/{id}
        return BadRequest(404, "not_found", f"Response with id {response_id!r} not found.")
    return BadRequest(404, "previous_response_not_found", f"Previous response with id {response_id!r} not found.", param)


def response_id(request_id: str) -> str:
    """The id of the response that answers request `request_id` (its items' ids embed the request id too)."""
    return f"resp_{request_id}"


def response_id_of_item(item_id: str) -> str | None:
    """The response an output item of this door belongs to (`msg_<request id>_<n>` → `resp_<request id>`)."""
    kind, _, rest = item_id.partition("_")
    request_id, _, index = rest.rpartition("_")
    if kind in ("msg", "rs", "fc") and request_id.startswith("req_") and index.isdigit():
        return response_id(request_id)
    return None


def wanted(body: dict[str, Any]) -> tuple[str | None, frozenset[str]]:
    """The stored response `body` continues (`previous_response_id`) and those its `item_reference`s point into."""
    previous = body.get("previous_response_id")
    if previous is not None:
        previous = _string(previous, "previous_response_id", max_length=256, empty=False)
    referred: set[str] = set()
    items = body.get("input")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("type") == "item_reference" and isinstance(item.get("id"), str):
                response_id = response_id_of_item(item["id"])
                if response_id is not None:
                    referred.add(response_id)
    return previous, frozenset(referred - {previous})


# ---------------------------------------------------------------------------------------------- fields


def ignore_typed(*kinds: type) -> Callable[[str, Any], None]:
    """Accepted and ignored (it cannot change the answer), but only as the type the API gives it: a wrong type
    is a client's bug that ignoring would hide."""

    def check(param: str, value: Any) -> None:
        if value is not None and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise invalid(param, f"must be {' or '.join(_kind(k()) for k in kinds)}, not {_kind(value)}")

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
    "client_metadata": ignore_typed(dict),  # the client's own telemetry tags (Codex CLI sends them); never shown to the model
    "truncation": accept_default("disabled", "auto"),
    "prompt_cache_retention": ignore_typed(str),
    "max_tool_calls": ignore_typed(int),  # bounds hosted tool calls: the catalog bounds the vendor's searches instead
    "top_logprobs": accept_default(0),
    "background": accept_default(False),
    "conversation": refuse("server-held conversations are not kept by this gateway: send the whole conversation in input"),
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
    stream = _bool(body, "stream", False)
    _stream_options(body.get("stream_options"), stream)
    store = _bool(body, "store", True)
    previous, _ = wanted(body)
    parallel = _bool(body, "parallel_tool_calls", True)
    include = _include(body.get("include"))
    tools, dropped, namespaced = _tools(body.get("tools"))
    # A web search goes to the adapters as `options.hostedTools`: the serving vendor's own search runs it where
    # the catalog allows, else the turn names it dropped (app.providers.hosted).
    web_search = _web_search(body.get("tools"))
    dropped = [kind for kind in dropped if kind not in WEB_SEARCH_TYPES]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("instructions", "must be a string")
    conversation = _Conversation(stored, namespaced)
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


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _bool(body: dict[str, Any], key: str, default: bool, prefix: str = "") -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(prefix + key, f"must be a boolean, not {_kind(value)}")
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(key, f"must be a number, not {_kind(value)}")
    if not low <= value <= high:
        raise invalid(key, f"must be between {low:g} and {high:g}")
    return float(value)


def _string(value: Any, param: str, *, max_length: int = 512, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise invalid(param, f"must be a string, not {_kind(value)}")
    if len(value) > max_length:
        raise invalid(param, f"must be at most {max_length} characters")
    if not empty and not value:
        raise invalid(param, "must not be empty")
    return value


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(param, f"must be an object, not {_kind(value)}")
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(param, f"must be an array, not {_kind(value)}")
    return value


def _stream_options(value: Any, stream: bool) -> None:
    if value is None:
        return
    options = _object(value, "stream_options")
    for key in options:
        if key != "include_obfuscation":
            raise invalid(f"stream_options.{key}", "unrecognized stream option")
    _bool(options, "include_obfuscation", False, "stream_options.")  # no obfuscation is sent: nothing to pad
    if not stream:
        raise invalid("stream_options", "only allowed when stream is true")


def _include(value: Any) -> list[str]:
    if value is None:
        return []
    items = _list(value, "include")
    for i, item in enumerate(items):
        _string(item, f"include.{i}")
        if item == "message.output_text.logprobs":
            raise unsupported(f"include.{i}", "log probabilities are not offered across vendors")
    return items


# ---------------------------------------------------------------------------------------------- options


def _options(body: dict[str, Any], tools: list[Tool]) -> StreamOptions:
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise invalid("max_output_tokens", f"must be an integer, not {_kind(max_tokens)}")
        if not 1 <= max_tokens <= MAX_TOKENS:
            raise invalid("max_output_tokens", f"must be between 1 and {MAX_TOKENS}")
    metadata: dict[str, Any] = {}
    raw_metadata = body.get("metadata")
    if raw_metadata is not None:
        if not isinstance(raw_metadata, dict) or not all(isinstance(v, str) for v in raw_metadata.values()):
            raise invalid("metadata", "must be an object of string values")
        metadata.update(raw_metadata)
    for key in ("user", "safety_identifier"):
        if body.get(key) is not None:
            # The end user's id, passed to vendors that take one (Anthropic metadata.user_id).
            metadata.setdefault("userId", _string(body[key], key))
    session = body.get("prompt_cache_key")
    json_schema = _json_schema(body.get("text"))
    return StreamOptions.model_validate(
        {
            "max_tokens": max_tokens,
            "temperature": _number(body, "temperature", 0, 2),
            "top_p": _number(body, "top_p", 0, 1),
            "reasoning": _reasoning(body.get("reasoning")),
            "tool_choice": _tool_choice(body.get("tool_choice"), tools),
            "metadata": metadata or None,
            "session_id": _string(session, "prompt_cache_key", max_length=256) if session is not None else None,
            # Only `false` is carried: the vendors' default is parallel calls.
            "parallel_tool_calls": False if body.get("parallel_tool_calls") is False else None,
            **structured_output(json_schema),
        },
        context=DOOR_VALIDATION,
    )


def _reasoning(value: Any) -> Reasoning | None:
    if value is None:
        return None
    reasoning = _object(value, "reasoning")
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
    text = _object(value, "text")
    for key in text:
        if key not in ("format", "verbosity"):
            raise invalid(f"text.{key}", "unrecognized text option")
    verbosity = text.get("verbosity")
    if verbosity is not None and verbosity not in ("low", "medium", "high"):
        raise invalid("text.verbosity", "must be one of low, medium, high")
    if text.get("format") is None:
        return None
    form = _object(text["format"], "text.format")
    kind = form.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT  # JSON mode (the unified jsonObject), which a vendor without it refuses
    if kind != "json_schema":
        raise invalid("text.format.type", "must be text, json_object or json_schema")
    if form.get("name") is not None:
        _string(form["name"], "text.format.name", max_length=64)
    return _object(form.get("schema"), "text.format.schema")


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
        raise unsupported("tool_choice.type", f"{value['type']!r} is not supported: choose auto, none, required or a function")
    raise invalid("tool_choice", 'must be "auto", "none", "required" or {"type": "function", "name"}')


WEB_SEARCH_TYPES = ("web_search", "web_search_2025_08_26", "web_search_preview", "web_search_preview_2025_03_11")


def _web_search(value: Any) -> WebSearch | None:
    """The web search tool of `tools`, if there is one (its `filters`, `user_location` and
    `search_context_size` are not carried: docs/adapters/web-search.md)."""
    for i, tool in enumerate(value if isinstance(value, list) else ()):
        if isinstance(tool, dict) and tool.get("type") in WEB_SEARCH_TYPES:
            live = _bool(tool, "external_web_access", True, f"tools.{i}.")
            return WebSearch(external_web_access=live)
    return None


NAMESPACE_SEPARATOR = "__"  # a namespaced function's name at the vendor: `<namespace>__<name>`


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
            _string(description, f"{param}.description", max_length=100_000)
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

    for i, raw in enumerate(_list(value, "tools")):
        param = f"tools.{i}"
        tool = _object(raw, param)
        kind = _string(tool.get("type"), f"{param}.type", max_length=128, empty=False)
        if kind == "function":
            function(tool, param, None)
        elif kind == "namespace":
            namespace = tool.get("name")
            if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
                raise invalid(f"{param}.name", "must be 1-64 letters, digits or _")
            group = tool.get("description")
            group = _string(group, f"{param}.description", max_length=100_000) if group is not None else ""
            for j, inner in enumerate(_list(tool.get("tools"), f"{param}.tools")):
                inner = _object(inner, f"{param}.tools.{j}")
                inner_kind = _string(inner.get("type"), f"{param}.tools.{j}.type", max_length=128, empty=False)
                if inner_kind == "function":
                    function(inner, f"{param}.tools.{j}", namespace, group)
                else:
                    drop(f"{namespace}.{inner_kind}")
        else:
            drop(kind)
    return tools, dropped, namespaced


# ---------------------------------------------------------------------------------------------- input


class _Conversation:
    """Reads `input` in order into unified messages (see the module docstring)."""

    def __init__(
        self, stored: Mapping[str, StoredResponse] | None = None, namespaced: Mapping[str, tuple[str, str]] | None = None
    ) -> None:
        self.stored = stored or {}
        self.namespaces = {pair: flat for flat, pair in (namespaced or {}).items()}  # (namespace, name) → flat
        self.items: list[dict[str, Any]] = []  # every item read, as wire items (references resolved)
        self._by_id: dict[str, dict[str, Any]] = {}  # the items read so far that have an id
        self.messages: list[Message] = []
        self.system: list[str] = []  # system / developer text before the conversation
        self.calls: dict[str, str] = {}  # call id → tool name, of every function_call so far
        self.answered: set[str] = set()
        self._assistant: list[Any] | None = None  # the open assistant message's blocks (reasoning as `_Reasoning`)
        self._origin: Origin | None = None
        self.compaction = False  # `input` ended with a compaction trigger

    def read_stored(self, items: list[dict[str, Any]]) -> None:
        """The conversation of the stored response a request continues (read before its `input`)."""
        for i, item in enumerate(items):
            self._item(item, f"previous_response_id.{i}")
        self._close_assistant()

    def read(self, value: Any) -> None:
        if isinstance(value, str):
            if not value:
                raise invalid("input", "must not be empty")
            self._close_assistant()
            self.items.append({"type": "message", "role": "user", "content": value})
            self.messages.append(UserMessage(content=value))
            return
        if not isinstance(value, list) or not value:
            raise invalid("input", "must be a string or a non-empty array of input items")
        last = len(value) - 1
        for i, raw in enumerate(value):
            if isinstance(raw, dict) and raw.get("type") == compaction.TRIGGER:
                if i != last:
                    raise invalid(f"input.{i}.type", "a compaction_trigger must be the last input item")
                self.compaction = True  # a request control, not part of the conversation: never stored
                continue
            self._item(raw, f"input.{i}")
        self._close_assistant()
        if not self.messages:
            raise invalid("input", "needs at least one user, assistant or tool item besides system messages")

    def _referred(self, item: dict[str, Any], param: str) -> dict[str, Any]:
        """The stored item an `item_reference` names: one read before it (the conversation continued
        included), or an output item of another stored response of the key."""
        item_id = _string(item.get("id"), f"{param}.id", max_length=256, empty=False)
        found = self._by_id.get(item_id)
        if found is None:
            response_id = response_id_of_item(item_id)
            stored = self.stored.get(response_id) if response_id else None
            found = next((i for i in stored.items if i.get("id") == item_id), None) if stored else None
        if found is None:
            raise invalid(f"{param}.id", f"item_reference {item_id!r} names no stored item of this key (stored "
                          "responses are kept with store: true, and only for the retention period)")  # fmt: skip
        return found

    def _item(self, raw: Any, param: str) -> None:
        item = _object(raw, param)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "item_reference":
            item = self._referred(item, param)
            kind = item.get("type", "message" if "role" in item else None)
        self.items.append(item)
        if isinstance(item.get("id"), str):
            self._by_id[item["id"]] = item
        if kind == "message":
            self._message(item, param)
        elif kind == "function_call":
            self._function_call(item, param)
        elif kind == "function_call_output":
            self._function_call_output(item, param)
        elif kind == "reasoning":
            self._reasoning(item, param)
        elif kind in compaction.ITEM_TYPES:
            self._compaction(item, param)
        elif kind == "web_search_call":
            pass  # a search the vendor ran for an earlier answer (which holds what it found): nothing to replay
        elif isinstance(kind, str):
            raise invalid(f"{param}.type", f"input items of type {kind!r} are not supported (message, function_call, "
                          "function_call_output, reasoning, compaction, web_search_call and item_reference "
                          "are)")  # fmt: skip
        else:
            raise invalid(f"{param}.type", "must be a string naming the item type")

    # -- assistant-side items join one assistant message

    def _assistant_blocks(self) -> list[Any]:
        if self._assistant is None:
            self._assistant = []
            self._origin = None
        return self._assistant

    def _close_assistant(self) -> None:
        blocks, origin = self._assistant, self._origin
        self._assistant = None
        if blocks is None:
            return
        content = []
        for block in blocks:
            if isinstance(block, (_Reasoning, SignedCall)):
                thinking = block.block(origin)
                if thinking is not None:
                    content.append(thinking)
            else:
                content.append(block)
        if not content:  # only reasoning that cannot be replayed (foreign and without text): nothing to send
            return
        has_calls = any(isinstance(b, ToolCall) for b in content)
        self.messages.append(
            AssistantMessage(
                content=content,
                provider=origin.provider if origin else None,
                api=origin.api if origin else None,
                model=origin.model if origin else None,
                stop_reason="toolUse" if has_calls else "stop",
            )
        )

    def _message(self, item: dict[str, Any], param: str) -> None:
        role = item.get("role")
        content = item.get("content")
        if role == "assistant":
            blocks = self._assistant_blocks()
            text = _assistant_text(content, f"{param}.content")
            if text:
                blocks.append(TextContent(text=text))
            return
        self._close_assistant()
        if role in ("system", "developer"):
            text = _input_text(content, f"{param}.content")
            if not self.messages:
                self.system.append(text)
            elif text:
                self.messages.append(
                    SystemMessage.model_validate({"content": [{"text": text}]}, context=DOOR_VALIDATION)
                )
        elif role == "user":
            self.messages.append(UserMessage(content=_user_content(content, f"{param}.content")))
        else:
            raise invalid(f"{param}.role", "must be one of user, assistant, system, developer")

    def _function_call(self, item: dict[str, Any], param: str) -> None:
        call_id = _string(item.get("call_id"), f"{param}.call_id", max_length=256, empty=False)
        name = _string(item.get("name"), f"{param}.name", max_length=128, empty=False)
        namespace = item.get("namespace")
        if namespace is not None:  # a function of a namespace group: its name at the vendor
            namespace = _string(namespace, f"{param}.namespace", max_length=64, empty=False)
            name = self.namespaces.get((namespace, name), f"{namespace}{NAMESPACE_SEPARATOR}{name}")
        if call_id in self.calls:
            raise invalid(f"{param}.call_id", f"function call {call_id!r} appears more than once")
        arguments = item.get("arguments")
        if not isinstance(arguments, str):
            raise invalid(f"{param}.arguments", "must be a string of JSON")
        try:
            parsed = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError as exc:
            raise invalid(f"{param}.arguments", f"is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise invalid(f"{param}.arguments", "must be a JSON object")
        self.calls[call_id] = name
        self._assistant_blocks().append(ToolCall(id=call_id, name=name, arguments=parsed))

    def _function_call_output(self, item: dict[str, Any], param: str) -> None:
        self._close_assistant()
        call_id = _string(item.get("call_id"), f"{param}.call_id", max_length=256, empty=False)
        if call_id not in self.calls:
            raise invalid(f"{param}.call_id", f"{call_id!r} answers no function_call of an earlier item")
        if call_id in self.answered:
            raise invalid(f"{param}.call_id", f"function call {call_id!r} is answered more than once")
        self.answered.add(call_id)
        output = item.get("output")
        if isinstance(output, str):
            content: list[TextContent | ImageContent] = [TextContent(text=output)]
        else:
            content = _parts(output, f"{param}.output", allow_empty=True)
        self.messages.append(ToolResultMessage(tool_call_id=call_id, tool_name=self.calls[call_id], content=content))

    def _compaction(self, item: dict[str, Any], param: str) -> None:
        """A compaction item this door made: its summary stands for the conversation before it."""
        self._close_assistant()
        encrypted = _string(item.get("encrypted_content"), f"{param}.encrypted_content", max_length=10_000_000)
        summary = compaction.unwrap_summary(encrypted)
        if summary is None:
            raise unsupported(f"{param}.encrypted_content", "this compaction item was not made by this gateway: its "
                              "content is encrypted by the service that made it and cannot be read here")  # fmt: skip
        self.messages.append(UserMessage(content=compaction.SUMMARY_PREFIX + summary))

    def _reasoning(self, item: dict[str, Any], param: str) -> None:
        summary = [_typed_text(p, f"{param}.summary.{j}", "summary_text")
                   for j, p in enumerate(_list(item.get("summary", []), f"{param}.summary"))]  # fmt: skip
        content = item.get("content")
        texts = [_typed_text(p, f"{param}.content.{j}", "reasoning_text")
                 for j, p in enumerate(_list(content, f"{param}.content"))] if content is not None else []  # fmt: skip
        encrypted = item.get("encrypted_content")
        opaque = unwrap_reasoning(_string(encrypted, f"{param}.encrypted_content", max_length=10_000_000)) if encrypted is not None else None
        blocks = self._assistant_blocks()
        if opaque is not None and self._origin is None:
            self._origin = opaque.origin
        if opaque is not None and opaque.call:  # a function call's own signature: it goes on the call before it
            if blocks and isinstance(blocks[-1], ToolCall):
                blocks[-1] = SignedCall(blocks[-1], Unwrapped(opaque.origin, opaque.signature))
            return
        # Raw reasoning text when the item has it, else its summary (what this door sent for the block).
        blocks.append(_Reasoning("\n\n".join(texts) if texts else "\n\n".join(summary), opaque))


@dataclass(frozen=True, slots=True)
class _Reasoning:
    """A reasoning item as the client sent it; what it becomes depends on the assistant message's origin (the
    first origin-wrapped `encrypted_content` in it), known once the whole message is read."""

    text: str
    opaque: Opaque | None

    def block(self, origin: Origin | None) -> ThinkingContent | None:
        """The vendor's state stays only when it comes from the message's origin; redacted reasoning from
        anywhere else cannot be replayed to anyone and is left out."""
        own = self.opaque is not None and self.opaque.origin == origin
        signature = self.opaque.signature if own and self.opaque.signature else None
        if self.opaque is not None and self.opaque.redacted:
            return ThinkingContent(thinking="", thinking_signature=signature, redacted=True) if signature else None
        if not self.text and signature is None:
            return None
        return ThinkingContent(thinking=self.text, thinking_signature=signature)


def _typed_text(part: Any, param: str, kind: str) -> str:
    part = _object(part, param)
    if part.get("type") != kind:
        raise invalid(f"{param}.type", f"must be {kind!r}")
    return _string(part.get("text"), f"{param}.text", max_length=10_000_000)


def _input_text(content: Any, param: str) -> str:
    """System / developer content: a string or `input_text` parts, joined."""
    if isinstance(content, str):
        return content
    parts = _list(content, param)
    return "".join(_typed_text(p, f"{param}.{j}", "input_text") for j, p in enumerate(parts))


def _assistant_text(content: Any, param: str) -> str:
    """Assistant content: a string or `output_text` / `refusal` parts, joined."""
    if isinstance(content, str):
        return content
    texts = []
    for j, raw in enumerate(_list(content, param)):
        part = _object(raw, f"{param}.{j}")
        kind = part.get("type")
        if kind in ("output_text", "input_text"):
            texts.append(_string(part.get("text"), f"{param}.{j}.text", max_length=10_000_000))
        elif kind == "refusal":
            texts.append(_string(part.get("refusal"), f"{param}.{j}.refusal", max_length=10_000_000))
        else:
            raise invalid(f"{param}.{j}.type", "must be output_text or refusal")
    return "".join(texts)


def _user_content(content: Any, param: str) -> str | list[TextContent | ImageContent]:
    if isinstance(content, str):
        return content
    return _parts(content, param, allow_empty=False)


def _parts(content: Any, param: str, *, allow_empty: bool) -> list[TextContent | ImageContent]:
    """`input_text` / `input_image` parts (a user message's content, a function call's output)."""
    parts = _list(content, param)
    if not parts and not allow_empty:
        raise invalid(param, "must be a string or a non-empty array of content parts")
    blocks: list[TextContent | ImageContent] = []
    for j, raw in enumerate(parts):
        where = f"{param}.{j}"
        part = _object(raw, where)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            blocks.append(TextContent(text=_string(part.get("text"), f"{where}.text", max_length=10_000_000)))
        elif kind == "input_image":
            blocks.append(_image(part, where))
        elif kind in ("input_file", "input_audio"):
            raise unsupported(f"{where}.type", f"{kind} content parts are not supported")
        else:
            raise invalid(f"{where}.type", "must be input_text or input_image")
    return blocks


def _image(part: dict[str, Any], param: str) -> ImageContent:
    if part.get("file_id") is not None:
        raise unsupported(f"{param}.file_id", "uploaded files are not supported: send the image as a data: URL")
    url = part.get("image_url")
    if not isinstance(url, str):
        raise invalid(f"{param}.image_url", "must be a string")
    if url.startswith(("http://", "https://")):
        raise unsupported(
            f"{param}.image_url", "the gateway never fetches URLs: send the image inline as a data:image/...;base64, URL"
        )
    match = _DATA_URL.match(url)
    if match is None:
        raise invalid(f"{param}.image_url", "must be a data:image/<type>;base64,<data> URL")
    data = match.group(2)
    if not data:
        raise invalid(f"{param}.image_url", "the data URL is empty")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{param}.image_url", "the data URL's payload is not valid base64") from None
    return ImageContent(data=data, mime_type=match.group(1).lower())


__all__ = [
    "DROPPED_TOOLS_HEADER", "FIELDS", "PROSE_PATHS", "ResponsesRequest", "decode", "error_body", "response_not_found",
    "wanted",
]  # fmt: skip
