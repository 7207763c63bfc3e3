"""Decode a Gemini `generateContent` / `streamGenerateContent` request into the unified `StreamRequest`.

Pure: the parsed JSON body (with what the URL says under `URL_FIELDS`, put there by `bind_url`) in, a
`GeminiRequest` out, or a `BadRequest` whose message starts with the field at fault in Gemini's terms
(`contents.1.parts.0.functionResponse.name`). Field names are read in Gemini's JSON spelling (camelCase), and
in the proto's snake_case as Google's own parser accepts them (`proto_json.py`); `contents` is read by
`conversation.py`. What Gemini alone understands (`safetySettings`, the exact `thinkingConfig`) travels in the
unified request's door-only `options.passthrough` for the Gemini adapter (under `PASSTHROUGH_API`); every vendor
gets the unified translation. docs/doors/gemini.md lists every field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

import orjson
from pydantic import ValidationError

from app.contract.messages import DOOR_VALIDATION, Context, Tool
from app.contract.request import HostedToolsOption, Reasoning, StreamOptions, StreamRequest, ToolChoiceTool, WebSearch
from app.doors.base import DROPPED_TOOLS_HEADER, DoorRequest
from app.doors.fields import bool_at, fail, list_at, number_at, object_at, string_at
from app.doors.gemini.conversation import Conversation, system_instruction
from app.doors.gemini.proto_json import field_names, integer_of, refuse_unknown, value_of
from app.doors.structured_output import structured_output

# Where `bind_url` puts what the request's URL says (the model of the path, `alt`): a body key no client field
# has, overwritten by the URL on every request.
URL_FIELDS = "gateway:url"
# `streamGenerateContent`'s `alt`: `sse` (server-sent events, what the Google SDKs ask for) or the default JSON
# array (no `alt`, or `alt=json`).
STREAM_FORMS = (None, "sse", "json")
ARRAY_NOT_RESUMABLE = ("a JSON-array stream (streamGenerateContent without alt=sse) cannot be resumed: "
                       "ask for server-sent events with ?alt=sse")  # fmt: skip
MODEL_PREFIX = "models/"
PASSTHROUGH_API = "google-generative-ai"  # the api whose adapter reads what only Gemini understands
# `thinkingConfig.thinkingBudget` → the unified level: the highest level whose budget the request reaches (the
# budgets the Gemini adapter sends for 2.5 models); 0 turns thinking off, -1 (dynamic) is `medium`.
BUDGET_LEVELS: tuple[tuple[int, Reasoning], ...] = ((24576, "high"), (8192, "medium"), (2048, "low"), (1, "minimal"))
DYNAMIC_LEVEL: Reasoning = "medium"
THINKING_LEVELS: dict[str, Reasoning] = {"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}
CALLING_MODES = ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED")
MAX_TOKENS = 1_000_000
MAX_STOP, MAX_STOP_LENGTH = 16, 1000
TOP_LEVEL = frozenset({"model", "contents", "systemInstruction", "tools", "toolConfig", "generationConfig",
                       "safetySettings", "cachedContent", "labels", URL_FIELDS})  # fmt: skip
# `generationConfig` fields the gateway takes; the ones below it refuses unless they hold their default,
# `topK` goes to a Gemini upstream only (Gemini CLI always sends it; no other vendor's api takes it), and
# `mediaResolution` (how images are tokenized) is ignored.
GENERATION_FIELDS = frozenset({"maxOutputTokens", "temperature", "topP", "stopSequences", "responseMimeType",
                               "responseSchema", "responseJsonSchema", "thinkingConfig", "candidateCount",
                               "responseModalities", "mediaResolution", "topK", "seed", "presencePenalty",
                               "frequencyPenalty", "responseLogprobs", "logprobs"})  # fmt: skip
REFUSED_UNLESS_DEFAULT: dict[str, tuple[tuple[Any, ...], str]] = {
    "candidateCount": ((1,), "one candidate only: the gateway streams one answer"),
    "responseLogprobs": ((False,), "log probabilities are not offered across vendors"),
    "logprobs": ((), "log probabilities are not offered across vendors"),
}
TEXT_MIME_TYPES = ("text/plain", "application/json")
# Gemini's Schema (an OpenAPI subset, upper-case types) → JSON Schema: these keys are copied, `type` lowered,
# `nullable` folded into the type, `propertyOrdering` and `example` left out (they do not constrain the value).
SCHEMA_KEYS = frozenset({"format", "title", "description", "enum", "maxItems", "minItems", "required",
                         "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "default",
                         "minimum", "maximum"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class GeminiRequest(DoorRequest):
    """The decoded request and what the encoder needs: the model as the client named it, whether to show
    thought parts (`thinkingConfig.includeThoughts`)."""

    client_model: str = ""
    include_thoughts: bool = False
    array: bool = False  # `streamGenerateContent` without `alt=sse`: the chunks as one streamed JSON array


# ----------------------------------------------------------------------------- schemas


def json_schema(schema: Any, path: str) -> dict[str, Any]:
    """A Gemini `Schema` (`parameters`, `responseSchema`) as the JSON Schema every vendor reads."""
    schema = object_at(schema, path)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        name = next(iter(field_names({key: None})))
        if name == "type":
            out["type"] = string_at(value, f"{path}.type").lower()
        elif name == "properties":
            props = object_at(value, f"{path}.properties")
            out["properties"] = {k: json_schema(v, f"{path}.properties.{k}") for k, v in props.items()}
        elif name == "items":
            out["items"] = json_schema(value, f"{path}.items")
        elif name == "anyOf":
            out["anyOf"] = [json_schema(v, f"{path}.anyOf.{i}") for i, v in enumerate(list_at(value, f"{path}.anyOf"))]
        elif name in SCHEMA_KEYS:
            out[name] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


# ----------------------------------------------------------------------------- tools and options


# Google's built-in tools that are its web search: the hosted web search (`app.providers.hosted`).
SEARCH_TOOLS = ("googleSearch", "googleSearchRetrieval")


def _tools(value: Any) -> tuple[list[Tool], WebSearch | None, list[str]]:
    """The declared functions, the web search asked for (`googleSearch`), and the other built-in tools
    (`codeExecution`, `urlContext`, …), which are dropped and named in `X-Gateway-Dropped-Tools`."""
    tools: list[Tool] = []
    web_search: WebSearch | None = None
    dropped: list[str] = []
    names: set[str] = set()
    for index, raw in enumerate(list_at(value, "tools")):
        path = f"tools.{index}"
        tool = object_at(raw, path)
        for kind in sorted(field_names(tool) - {"functionDeclarations"}):
            if kind in SEARCH_TOOLS:
                web_search = WebSearch()
            elif kind not in dropped:
                dropped.append(kind)
        for number, raw_decl in enumerate(
            list_at(value_of(tool, "functionDeclarations") or [], f"{path}.functionDeclarations")
        ):
            where = f"{path}.functionDeclarations.{number}"
            decl = object_at(raw_decl, where)
            name = string_at(decl.get("name"), f"{where}.name", empty=False)
            if len(name) > 128:
                fail(f"{where}.name", "must be at most 128 characters")
            if name in names:
                fail(f"{where}.name", f"function {name!r} is declared twice")
            names.add(name)
            if value_of(decl, "parametersJsonSchema") is not None:
                parameters = object_at(value_of(decl, "parametersJsonSchema"), f"{where}.parametersJsonSchema")
            elif decl.get("parameters") is not None:
                parameters = json_schema(decl["parameters"], f"{where}.parameters")
            else:
                parameters = {"type": "object", "properties": {}}
            description = decl.get("description")
            tools.append(Tool(
                name=name, description="" if description is None else string_at(description, f"{where}.description"),
                parameters=parameters,
            ))  # fmt: skip
    return tools, web_search, dropped


def _tool_choice(value: Any, tools: list[Tool]) -> tuple[str | ToolChoiceTool | None, list[Tool]]:
    """`toolConfig.functionCallingConfig` → the unified tool choice, and the tools the model may call: `ANY`
    with several `allowedFunctionNames` keeps only those tools and requires a call."""
    config = object_at(value, "toolConfig")
    calling = value_of(config, "functionCallingConfig")
    if calling is None:
        return None, tools
    path = "toolConfig.functionCallingConfig"
    calling = object_at(calling, path)
    mode = calling.get("mode") or "AUTO"
    if mode not in CALLING_MODES:
        fail(f"{path}.mode", f"must be one of {', '.join(CALLING_MODES[:4])}")
    allowed = value_of(calling, "allowedFunctionNames")
    names = [string_at(n, f"{path}.allowedFunctionNames.{i}", empty=False)
             for i, n in enumerate(list_at(allowed, f"{path}.allowedFunctionNames"))] if allowed is not None else []  # fmt: skip
    if names and mode != "ANY":
        fail(f"{path}.allowedFunctionNames", "may only be set with mode ANY")
    if mode == "NONE":
        return "none", tools
    if mode != "ANY":
        return "auto", tools
    if not tools:
        fail(f"{path}.mode", "ANY needs functionDeclarations")
    declared = {t.name for t in tools}
    for index, name in enumerate(names):
        if name not in declared:
            fail(f"{path}.allowedFunctionNames.{index}", f"names no declared function: {name!r}")
    if len(names) == 1:
        return ToolChoiceTool(type="tool", name=names[0]), tools
    if names:
        return "required", [t for t in tools if t.name in names]
    return "required", tools


def _reasoning(config: Any, path: str) -> tuple[Reasoning | None, bool]:
    """`thinkingConfig` → the unified reasoning level and whether the client wants thought parts."""
    thinking = object_at(config, path)
    refuse_unknown(thinking, frozenset({"thinkingBudget", "thinkingLevel", "includeThoughts"}), path)
    include = (
        bool_at(value_of(thinking, "includeThoughts"), f"{path}.includeThoughts")
        if value_of(thinking, "includeThoughts") is not None
        else False
    )
    level = value_of(thinking, "thinkingLevel")
    budget = value_of(thinking, "thinkingBudget")
    if level is not None and budget is not None:
        fail(f"{path}.thinkingLevel", "set thinkingLevel or thinkingBudget, not both")
    if level is not None:
        name = string_at(level, f"{path}.thinkingLevel").upper()
        if name == "THINKING_LEVEL_UNSPECIFIED":
            return DYNAMIC_LEVEL, include
        if name not in THINKING_LEVELS:
            fail(f"{path}.thinkingLevel", f"must be one of {', '.join(THINKING_LEVELS)}")
        return THINKING_LEVELS[name], include
    if budget is not None:
        budget = integer_of(budget, f"{path}.thinkingBudget", -1)
        if budget == 0:
            return None, include
        if budget == -1:
            return DYNAMIC_LEVEL, include
        return next(level for floor, level in BUDGET_LEVELS if budget >= floor), include
    return (DYNAMIC_LEVEL if include else None), include


def _response_schema(config: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer must follow, from `responseMimeType` with `responseJsonSchema` or `responseSchema`
    (`application/json` without one is JSON mode, `_generation`)."""
    path = "generationConfig"
    mime = value_of(config, "responseMimeType")
    if mime is not None and string_at(mime, f"{path}.responseMimeType") not in TEXT_MIME_TYPES:
        fail(f"{path}.responseMimeType", f"must be one of {', '.join(TEXT_MIME_TYPES)}")
    schema = None
    if value_of(config, "responseJsonSchema") is not None:
        schema = object_at(value_of(config, "responseJsonSchema"), f"{path}.responseJsonSchema")
    elif value_of(config, "responseSchema") is not None:
        schema = json_schema(value_of(config, "responseSchema"), f"{path}.responseSchema")
    if schema is not None and mime != "application/json":
        fail(f"{path}.responseMimeType", "must be application/json with a response schema")
    return schema


def _generation(config: dict[str, Any], options: dict[str, Any], native: dict[str, Any]) -> bool:
    """`generationConfig` into the unified options (and what only Gemini reads into `native`); whether thought
    parts are wanted."""
    path = "generationConfig"
    refuse_unknown(config, GENERATION_FIELDS, path)
    for name, (defaults, reason) in REFUSED_UNLESS_DEFAULT.items():
        value = value_of(config, name)
        if value is not None and value not in defaults:
            fail(f"{path}.{name}", reason)
    # The sampling fields (`app.providers.sampling`): to the vendors that honour them, else a 400 or dropped.
    if (value := value_of(config, "seed")) is not None:
        options["seed"] = integer_of(value, f"{path}.seed", -(2**31))
    for name, unified in (("presencePenalty", "presence_penalty"), ("frequencyPenalty", "frequency_penalty")):
        if (value := value_of(config, name)) is not None:
            options[unified] = number_at(value, f"{path}.{name}", -2.0, 2.0) or None  # 0: unset
    modalities = value_of(config, "responseModalities")
    if modalities is not None and [str(m).upper() for m in list_at(modalities, f"{path}.responseModalities")] not in (
        [],
        ["TEXT"],
    ):
        fail(f"{path}.responseModalities", "only TEXT answers are offered")
    if (value := value_of(config, "maxOutputTokens")) is not None:
        options["max_tokens"] = integer_of(value, f"{path}.maxOutputTokens", 1)
        if options["max_tokens"] > MAX_TOKENS:
            fail(f"{path}.maxOutputTokens", f"must be at most {MAX_TOKENS}")
    if (value := value_of(config, "temperature")) is not None:
        options["temperature"] = number_at(value, f"{path}.temperature", 0.0, 2.0)
    if (value := value_of(config, "topP")) is not None:
        options["top_p"] = number_at(value, f"{path}.topP", 0.0, 1.0)
    if (value := value_of(config, "topK")) is not None:
        native["topK"] = number_at(value, f"{path}.topK", 1, 1_000_000)  # (the Python SDK sends a float)
    if (value := value_of(config, "stopSequences")) is not None:
        stops = [
            string_at(s, f"{path}.stopSequences.{i}", empty=False)
            for i, s in enumerate(list_at(value, f"{path}.stopSequences"))
        ]
        if len(stops) > MAX_STOP:
            fail(f"{path}.stopSequences", f"at most {MAX_STOP} stop sequences are supported")
        for index, stop in enumerate(stops):
            if len(stop) > MAX_STOP_LENGTH:
                fail(f"{path}.stopSequences.{index}", f"must be at most {MAX_STOP_LENGTH} characters")
        options["stop"] = stops or None
    schema = _response_schema(config)
    options.update(structured_output(schema))
    if schema is None and value_of(config, "responseMimeType") == "application/json":
        options["json_object"] = True  # JSON mode: OpenAI json_object, Gemini as sent; Anthropic refuses it
    include = False
    if (thinking := value_of(config, "thinkingConfig")) is not None:
        options["reasoning"], include = _reasoning(thinking, f"{path}.thinkingConfig")
        native["thinkingConfig"] = {k: v for k, v in object_at(thinking, path).items()}
    if options.get("reasoning") and "top_p" in options:
        # Nucleus sampling with thinking: Gemini takes it (Gemini CLI always restates Gemini's own 0.95); OpenAI
        # reasoning models refuse it and Anthropic's thinking allows only 0.95 to 1. So it goes to Gemini alone.
        native["topP"] = options.pop("top_p")
    return include


def _safety(value: Any) -> list[dict[str, Any]]:
    settings = list_at(value, "safetySettings")
    for index, raw in enumerate(settings):
        setting = object_at(raw, f"safetySettings.{index}")
        string_at(setting.get("category"), f"safetySettings.{index}.category", empty=False)
        string_at(setting.get("threshold"), f"safetySettings.{index}.threshold", empty=False)
    return settings


def conversation_key(system: str | None, first: Any) -> str:
    """The same on every turn of one conversation (the system instruction and the first content never change):
    `options.sessionId`, which OpenAI gets as `prompt_cache_key`."""
    digest = hashlib.sha256((system or "").encode("utf-8", "surrogatepass") + b"\0")
    digest.update(orjson.dumps(first, option=orjson.OPT_SORT_KEYS))
    return "gem-" + digest.hexdigest()[:32]


# ----------------------------------------------------------------------------- the URL and the request


def bind_url(
    body: dict[str, Any], path: Mapping[str, str], query: Mapping[str, str], *, stream: bool = False
) -> dict[str, Any]:
    """The body with what the request's URL says (`DoorRoute.from_url`): the model of the path, `alt`, and
    whether the route streams (`:streamGenerateContent`)."""
    return {**body, URL_FIELDS: {"model": path.get("model", ""), "alt": query.get("alt"), "stream": stream}}


def model_name(raw: str) -> str:
    """The gateway model name in a path's `{model}`: what follows `models/` (a route, an alias, a bare id or
    `<provider>/<model>`, its `/` sent as is or URL-encoded)."""
    name = raw[len(MODEL_PREFIX) :] if raw.startswith(MODEL_PREFIX) else raw
    if not name:
        fail("model", "the path names no model", 404)
    return name


def decode(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> GeminiRequest:
    """The unified request for a Gemini body; raises `BadRequest` (400, or 404 for a model name that cannot
    name anything)."""
    url = body.get(URL_FIELDS) or {}
    model = model_name(str(url.get("model") or ""))
    stream = url.get("stream") is True
    alt = url.get("alt")
    if stream and alt not in STREAM_FORMS:
        fail(
            "alt",
            "streamGenerateContent answers as server-sent events (alt=sse) or as a JSON array (alt=json, the default)",
        )
    array = stream and alt != "sse"
    refuse_unknown(body, TOP_LEVEL, "")
    conversation = Conversation()
    raw_contents = list_at(body.get("contents"), "contents")
    if not raw_contents:
        fail("contents", "must not be empty")
    last_role = "user"
    for index, content in enumerate(raw_contents):
        last_role = conversation.add(content, f"contents.{index}")
    if last_role == "model":
        fail(f"contents.{len(raw_contents) - 1}.role", "a final model turn (prefill) is not supported")
    messages = conversation.messages
    system = (
        system_instruction(value_of(body, "systemInstruction"))
        if value_of(body, "systemInstruction") is not None
        else None
    )
    tools, web_search, dropped = _tools(body["tools"]) if body.get("tools") is not None else ([], None, [])
    options: dict[str, Any] = {}
    if web_search is not None:
        options["hosted_tools"] = HostedToolsOption(web_search=web_search)
    headers = {DROPPED_TOOLS_HEADER: ", ".join(dropped)} if dropped else {}
    native: dict[str, Any] = {}
    if value_of(body, "toolConfig") is not None:
        options["tool_choice"], tools = _tool_choice(value_of(body, "toolConfig"), tools)
    include = False
    if value_of(body, "generationConfig") is not None:
        include = _generation(object_at(value_of(body, "generationConfig"), "generationConfig"), options, native)
    if value_of(body, "safetySettings") is not None:
        native["safetySettings"] = _safety(value_of(body, "safetySettings"))
    if value_of(body, "cachedContent") is not None:  # a Gemini cache's name: only a Gemini upstream has it
        native["cachedContent"] = string_at(value_of(body, "cachedContent"), "cachedContent", empty=False)
    if native:  # what only Gemini understands, for a Gemini upstream
        options["passthrough"] = {**options.get("passthrough", {}), PASSTHROUGH_API: native}
    options["session_id"] = conversation_key(system, raw_contents[0])
    try:
        context = Context.model_validate(
            {"system_prompt": system, "messages": messages, "tools": tools or None}, context=DOOR_VALIDATION
        )
        unified = StreamRequest(
            model=model, context=context, options=StreamOptions.model_validate(options, context=DOOR_VALIDATION)
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        if where == "model":
            fail("model", f"{model!r} names no model", 404)
        fail(where, first["msg"])
    if array:  # Gemini's JSON-array stream: one array, no SSE lines, so nothing to resume with `id:` lines
        return GeminiRequest(unified=unified, stream=stream, client_model=model, include_thoughts=include, array=True,
                             response_headers={"Content-Type": "application/json", **headers},
                             resume_refused=ARRAY_NOT_RESUMABLE)  # fmt: skip
    return GeminiRequest(unified=unified, stream=stream, client_model=model, include_thoughts=include,
                         response_headers=headers or None)  # fmt: skip
