"""Decode a Gemini `generateContent` / `streamGenerateContent` request into the unified `StreamRequest`.

Pure: the parsed JSON body (with what the URL says under `URL_FIELDS`, put there by `bind_url`) in, a
`GeminiRequest` out, or a `BadRequest` whose message starts with the field at fault in Gemini's terms
(`contents.1.parts.0.functionResponse.name`). Field names are read in Gemini's JSON spelling (camelCase), and
in the proto's snake_case as Google's own parser accepts them. What Gemini alone understands (`safetySettings`,
the exact `thinkingConfig`) travels in the unified request's door-only `options.google` for the Gemini adapter;
every vendor gets the unified translation. docs/doors/gemini.md lists every field.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, NoReturn

import orjson
from pydantic import ValidationError

from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import Reasoning, StreamOptions, StreamRequest, ToolChoiceTool
from app.doors.base import DoorRequest
from app.doors.fields import bool_at, fail, integer_at, kind, list_at, number_at, object_at, string_at
from app.doors.gemini.signatures import Origin, Unwrapped, unwrap_signature
from app.doors.openai_chat.request import structured_output

# Where `bind_url` puts what the request's URL says (the model of the path, `alt`): a body key no client field
# has, overwritten by the URL on every request.
URL_FIELDS = "gateway:url"
# `streamGenerateContent`'s `alt`: `sse` (server-sent events, what the Google SDKs ask for) or the default JSON
# array (no `alt`, or `alt=json`).
STREAM_FORMS = (None, "sse", "json")
ARRAY_NOT_RESUMABLE = ("a JSON-array stream (streamGenerateContent without alt=sse) cannot be resumed: "
                       "ask for server-sent events with ?alt=sse")  # fmt: skip
MODEL_PREFIX = "models/"
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
    "seed": ((), "deterministic sampling is not offered across vendors"),
    "presencePenalty": ((0, 0.0), "penalties are not offered across vendors"),
    "frequencyPenalty": ((0, 0.0), "penalties are not offered across vendors"),
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


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _get(obj: dict[str, Any], name: str) -> Any:
    """A field in Gemini's JSON spelling (camelCase), or in the proto's (snake_case)."""
    value = obj.get(name)
    return obj.get(_snake(name)) if value is None else value


def _names(obj: dict[str, Any]) -> set[str]:
    """The object's field names in camelCase."""
    return {"".join(w.capitalize() if i else w for i, w in enumerate(k.split("_"))) for k in obj}


def _integer(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, str) and value.lstrip("-").isdigit():  # proto JSON: 64-bit integers may be strings
        value = int(value)
    return integer_at(value, path, minimum)


def _unknown(obj: dict[str, Any], known: frozenset[str], path: str) -> None:
    """Google's parser refuses a field it does not know; so does the door (a typo would change nothing)."""
    for name in sorted(_names(obj) - known):
        fail(f"{path}.{name}" if path else name, "unknown field")


# ----------------------------------------------------------------------------- schemas


def json_schema(schema: Any, path: str) -> dict[str, Any]:
    """A Gemini `Schema` (`parameters`, `responseSchema`) as the JSON Schema every vendor reads."""
    schema = object_at(schema, path)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        name = next(iter(_names({key: None})))
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


# ----------------------------------------------------------------------------- contents


def _text_part(part: dict[str, Any], path: str) -> str:
    return string_at(part.get("text"), f"{path}.text")


def _signature(part: dict[str, Any], path: str) -> Unwrapped | None:
    """A part's `thoughtSignature` when the door wrapped it (`gw1.`…); None for one it did not (say one a client
    got from Gemini directly), which has no known origin and is never sent to a vendor."""
    value = _get(part, "thoughtSignature")
    if value is None:
        return None
    return unwrap_signature(string_at(value, f"{path}.thoughtSignature"))


def _image(part: dict[str, Any], path: str) -> ImageContent:
    data = object_at(_get(part, "inlineData"), f"{path}.inlineData")
    mime = string_at(_get(data, "mimeType"), f"{path}.inlineData.mimeType", empty=False)
    if not mime.startswith("image/"):
        fail(f"{path}.inlineData.mimeType", f"only images are supported inline, not {mime!r}")
    raw = string_at(data.get("data"), f"{path}.inlineData.data", empty=False)
    standard = raw.replace("-", "+").replace("_", "/")  # proto JSON bytes may come in the URL-safe alphabet
    try:
        base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        fail(f"{path}.inlineData.data", "must be base64")
    raw = standard + "=" * (-len(standard) % 4)
    try:
        return ImageContent.model_validate({"data": raw, "mime_type": mime}, context=DOOR_VALIDATION)
    except ValidationError:
        fail(f"{path}.inlineData.mimeType", f"{mime!r} is not an image type")


def _refuse_part(part: dict[str, Any], path: str) -> NoReturn:
    kinds = sorted(_names(part) - {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"})
    kind = kinds[0] if kinds else "?"
    if kind == "fileData":
        fail(f"{path}.fileData", "file URIs are not supported: the gateway never fetches files; send inlineData")
    fail(f"{path}.{kind}" if kinds else path, "this part kind is not supported by the gateway")


def _result_text(response: Any, path: str) -> tuple[str, bool]:
    """A `functionResponse.response` as the result text other vendors read and whether it is an error: the text
    of `{"output": …}` or `{"error": …}` (what the Gemini SDKs and the gateway's own Gemini adapter write), any
    other object as JSON."""
    response = object_at(response if response is not None else {}, f"{path}.response")
    if set(response) == {"output"} and isinstance(response["output"], str):
        return response["output"], False
    if set(response) == {"error"} and isinstance(response["error"], str):
        return response["error"], True
    return json.dumps(response, ensure_ascii=False, separators=(",", ":")), False


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    answered: bool = False


class _Conversation:
    """Converts `contents` in order: each model turn's calls are answered by the `functionResponse` parts of
    the user turn after it, by id where the client sends one, else in order by name (older Gemini clients)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.open_calls: list[_Call] = []
        self.seen_ids: set[str] = set()

    def add(self, raw: Any, path: str) -> str:
        content = object_at(raw, path)
        role = content.get("role") or "user"
        parts = list_at(content.get("parts"), f"{path}.parts")
        if not parts:
            fail(f"{path}.parts", "must not be empty")
        if role in ("user", "function"):  # `function`: the role older clients give function responses
            self._user(parts, f"{path}.parts")
        elif role == "model":
            self._model(parts, f"{path}.parts", path)
        else:
            fail(f"{path}.role", f"must be 'user' or 'model', not {role!r}")
        return "model" if role == "model" else "user"

    def _user(self, parts: list[Any], path: str) -> None:
        calls, self.open_calls = self.open_calls, []
        results: list[ToolResultMessage] = []
        blocks: list[TextContent | ImageContent] = []
        for index, raw in enumerate(parts):
            where = f"{path}.{index}"
            part = object_at(raw, where)
            if part.get("text") is not None:
                text = _text_part(part, where)
                if text:
                    blocks.append(TextContent(text=text))
            elif _get(part, "inlineData") is not None:
                blocks.append(_image(part, where))
            elif _get(part, "functionResponse") is not None:
                results.append(self._result(object_at(_get(part, "functionResponse"), f"{where}.functionResponse"),
                                            calls, f"{where}.functionResponse"))  # fmt: skip
            else:
                _refuse_part(part, where)
        self.messages.extend(results)
        if blocks:
            self.messages.append(UserMessage(content=blocks))

    def _result(self, response: dict[str, Any], calls: list[_Call], path: str) -> ToolResultMessage:
        name = string_at(response.get("name"), f"{path}.name", empty=False)
        call_id = response.get("id")
        if call_id is not None:
            call_id = string_at(call_id, f"{path}.id")
        call = None
        if call_id:
            call = next((c for c in calls if c.id == call_id and not c.answered), None)
            if call is None:
                fail(f"{path}.id", f"{call_id!r} answers no functionCall of the model turn before")
        else:  # matched by name, in order
            call = next((c for c in calls if c.name == name and not c.answered), None)
            if call is None:
                fail(f"{path}.name", f"{name!r} answers no functionCall of the model turn before")
        call.answered = True
        text, is_error = _result_text(response.get("response"), path)
        content: list[TextContent | ImageContent] = [TextContent(text=text)]
        for index, raw in enumerate(list_at(response.get("parts") or [], f"{path}.parts")):
            where = f"{path}.parts.{index}"
            part = object_at(raw, where)
            if _get(part, "inlineData") is None:
                fail(where, "a function response's parts must be inlineData images")
            content.append(_image(part, where))
        return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=content, is_error=is_error)

    def _model(self, parts: list[Any], path: str, content_path: str) -> None:
        """A model turn: consecutive text parts (and consecutive thought parts) are one block, as a streamed
        answer comes back in many parts; a part with a signature ends its block. Signatures are kept only when
        they come from the turn's origin (the first wrapped signature in it)."""
        self.open_calls = []
        origin: Origin | None = None
        blocks: list[_Block | _SignedCall] = []
        open_block: _Block | None = None
        for index, raw in enumerate(parts):
            where = f"{path}.{index}"
            part = object_at(raw, where)
            signed = _signature(part, where)
            if signed is not None and origin is None:
                origin = signed.origin
            call = _get(part, "functionCall")
            if call is not None:
                open_block = None
                blocks.append(self._call(object_at(call, f"{where}.functionCall"), signed, f"{where}.functionCall", content_path, index))
                continue
            if part.get("text") is None:
                if _get(part, "thoughtSignature") is not None and len(_names(part) - {"thought"}) == 1:
                    text = ""  # a signature on a part of its own
                else:
                    _refuse_part(part, where)
            else:
                text = _text_part(part, where)
            thought = part.get("thought") is True
            if open_block is None or open_block.thought != thought:
                open_block = _Block(thought)
                blocks.append(open_block)
            open_block.text.append(text)
            if signed is not None or _get(part, "thoughtSignature") is not None:
                open_block.signed = signed
                open_block = None
        content = [b.block(origin) for b in blocks]
        self.messages.append(AssistantMessage(
            content=[b for b in content if b is not None],
            provider=origin.provider if origin else None,
            api=origin.api if origin else None,
            model=origin.model if origin else None,
            stop_reason="toolUse" if self.open_calls else "stop",
        ))  # fmt: skip

    def _call(self, call: dict[str, Any], signed: Unwrapped | None, path: str, content_path: str, index: int) -> _SignedCall:
        name = string_at(call.get("name"), f"{path}.name", empty=False)
        call_id = call.get("id")
        call_id = string_at(call_id, f"{path}.id") if call_id is not None else ""
        if not call_id:  # Gemini 2.x names no id: one the conversation keeps on every turn
            call_id = f"call_{content_path.rpartition('.')[2]}_{index}"
        if call_id in self.seen_ids:
            fail(f"{path}.id", f"functionCall id {call_id!r} appears more than once")
        self.seen_ids.add(call_id)
        args = object_at(call.get("args") if call.get("args") is not None else {}, f"{path}.args")
        self.open_calls.append(_Call(call_id, name))
        return _SignedCall(call_id, name, args, signed)


@dataclass(frozen=True, slots=True)
class _SignedCall:
    """A functionCall part with its signature, whose fate depends on the turn's origin (known at its end)."""

    id: str
    name: str
    arguments: dict[str, Any]
    signed: Unwrapped | None

    def block(self, origin: Origin | None) -> ToolCall:
        own = self.signed is not None and self.signed.origin == origin and self.signed.signature
        signature = self.signed.signature if own and self.signed is not None else None
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments, thought_signature=signature)


@dataclass(slots=True)
class _Block:
    thought: bool
    text: list[str] = field(default_factory=list)
    signed: Unwrapped | None = None

    def block(self, origin: Origin | None) -> TextContent | ThinkingContent | None:
        own = self.signed is not None and self.signed.origin == origin and self.signed.signature
        signature = self.signed.signature if own else None
        text = "".join(self.text)
        if self.thought:
            return ThinkingContent(thinking=text, thinking_signature=signature) if text or signature else None
        return TextContent(text=text, text_signature=signature) if text or signature else None


# ----------------------------------------------------------------------------- tools and options


def _system(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    content = object_at(value, "systemInstruction")
    texts = []
    for index, raw in enumerate(list_at(content.get("parts") or [], "systemInstruction.parts")):
        part = object_at(raw, f"systemInstruction.parts.{index}")
        if part.get("text") is None:
            fail(f"systemInstruction.parts.{index}", "system instruction parts must be text")
        texts.append(_text_part(part, f"systemInstruction.parts.{index}"))
    return "\n\n".join(t for t in texts if t) or None


def _tools(value: Any) -> list[Tool]:
    tools: list[Tool] = []
    names: set[str] = set()
    for index, raw in enumerate(list_at(value, "tools")):
        path = f"tools.{index}"
        tool = object_at(raw, path)
        for kind in sorted(_names(tool) - {"functionDeclarations"}):
            fail(f"{path}.{kind}", "Google's built-in tools are not offered by the gateway; declare functions")
        for number, raw_decl in enumerate(list_at(_get(tool, "functionDeclarations") or [], f"{path}.functionDeclarations")):
            where = f"{path}.functionDeclarations.{number}"
            decl = object_at(raw_decl, where)
            name = string_at(decl.get("name"), f"{where}.name", empty=False)
            if len(name) > 128:
                fail(f"{where}.name", "must be at most 128 characters")
            if name in names:
                fail(f"{where}.name", f"function {name!r} is declared twice")
            names.add(name)
            if _get(decl, "parametersJsonSchema") is not None:
                parameters = object_at(_get(decl, "parametersJsonSchema"), f"{where}.parametersJsonSchema")
            elif decl.get("parameters") is not None:
                parameters = json_schema(decl["parameters"], f"{where}.parameters")
            else:
                parameters = {"type": "object", "properties": {}}
            description = decl.get("description")
            tools.append(Tool(
                name=name, description="" if description is None else string_at(description, f"{where}.description"),
                parameters=parameters,
            ))  # fmt: skip
    return tools


def _tool_choice(value: Any, tools: list[Tool]) -> tuple[str | ToolChoiceTool | None, list[Tool]]:
    """`toolConfig.functionCallingConfig` → the unified tool choice, and the tools the model may call: `ANY`
    with several `allowedFunctionNames` keeps only those tools and requires a call."""
    config = object_at(value, "toolConfig")
    calling = _get(config, "functionCallingConfig")
    if calling is None:
        return None, tools
    path = "toolConfig.functionCallingConfig"
    calling = object_at(calling, path)
    mode = calling.get("mode") or "AUTO"
    if mode not in CALLING_MODES:
        fail(f"{path}.mode", f"must be one of {', '.join(CALLING_MODES[:4])}")
    allowed = _get(calling, "allowedFunctionNames")
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
    _unknown(thinking, frozenset({"thinkingBudget", "thinkingLevel", "includeThoughts"}), path)
    include = bool_at(_get(thinking, "includeThoughts"), f"{path}.includeThoughts") if _get(thinking, "includeThoughts") is not None else False
    level = _get(thinking, "thinkingLevel")
    budget = _get(thinking, "thinkingBudget")
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
        budget = _integer(budget, f"{path}.thinkingBudget", -1)
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
    mime = _get(config, "responseMimeType")
    if mime is not None and string_at(mime, f"{path}.responseMimeType") not in TEXT_MIME_TYPES:
        fail(f"{path}.responseMimeType", f"must be one of {', '.join(TEXT_MIME_TYPES)}")
    schema = None
    if _get(config, "responseJsonSchema") is not None:
        schema = object_at(_get(config, "responseJsonSchema"), f"{path}.responseJsonSchema")
    elif _get(config, "responseSchema") is not None:
        schema = json_schema(_get(config, "responseSchema"), f"{path}.responseSchema")
    if schema is not None and mime != "application/json":
        fail(f"{path}.responseMimeType", "must be application/json with a response schema")
    return schema


def _generation(config: dict[str, Any], options: dict[str, Any], native: dict[str, Any]) -> bool:
    """`generationConfig` into the unified options (and what only Gemini reads into `native`); whether thought
    parts are wanted."""
    path = "generationConfig"
    _unknown(config, GENERATION_FIELDS, path)
    for name, (defaults, reason) in REFUSED_UNLESS_DEFAULT.items():
        value = _get(config, name)
        if value is not None and value not in defaults:
            fail(f"{path}.{name}", reason)
    modalities = _get(config, "responseModalities")
    if modalities is not None and [str(m).upper() for m in list_at(modalities, f"{path}.responseModalities")] not in ([], ["TEXT"]):
        fail(f"{path}.responseModalities", "only TEXT answers are offered")
    if (value := _get(config, "maxOutputTokens")) is not None:
        options["max_tokens"] = _integer(value, f"{path}.maxOutputTokens", 1)
        if options["max_tokens"] > MAX_TOKENS:
            fail(f"{path}.maxOutputTokens", f"must be at most {MAX_TOKENS}")
    if (value := _get(config, "temperature")) is not None:
        options["temperature"] = number_at(value, f"{path}.temperature", 0.0, 2.0)
    if (value := _get(config, "topP")) is not None:
        options["top_p"] = number_at(value, f"{path}.topP", 0.0, 1.0)
    if (value := _get(config, "topK")) is not None:
        native["topK"] = number_at(value, f"{path}.topK", 1, 1_000_000)  # (the Python SDK sends a float)
    if (value := _get(config, "stopSequences")) is not None:
        stops = [string_at(s, f"{path}.stopSequences.{i}", empty=False) for i, s in enumerate(list_at(value, f"{path}.stopSequences"))]
        if len(stops) > MAX_STOP:
            fail(f"{path}.stopSequences", f"at most {MAX_STOP} stop sequences are supported")
        for index, stop in enumerate(stops):
            if len(stop) > MAX_STOP_LENGTH:
                fail(f"{path}.stopSequences.{index}", f"must be at most {MAX_STOP_LENGTH} characters")
        options["stop"] = stops or None
    schema = _response_schema(config)
    options.update(structured_output(schema))
    if schema is None and _get(config, "responseMimeType") == "application/json":
        options["json_object"] = True  # JSON mode: OpenAI json_object, Gemini as sent; Anthropic refuses it
    include = False
    if (thinking := _get(config, "thinkingConfig")) is not None:
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


def bind_url(body: dict[str, Any], path: Mapping[str, str], query: Mapping[str, str], *, stream: bool = False) -> dict[str, Any]:
    """The body with what the request's URL says (`DoorRoute.from_url`): the model of the path, `alt`, and
    whether the route streams (`:streamGenerateContent`)."""
    return {**body, URL_FIELDS: {"model": path.get("model", ""), "alt": query.get("alt"), "stream": stream}}


def model_name(raw: str) -> str:
    """The gateway model name in a path's `{model}`: what follows `models/` (a route, an alias, a bare id or
    `<provider>/<model>`, its `/` sent as is or URL-encoded)."""
    name = raw[len(MODEL_PREFIX):] if raw.startswith(MODEL_PREFIX) else raw
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
        fail("alt", "streamGenerateContent answers as server-sent events (alt=sse) or as a JSON array (alt=json, the default)")
    array = stream and alt != "sse"
    _unknown(body, TOP_LEVEL, "")
    conversation = _Conversation()
    raw_contents = list_at(body.get("contents"), "contents")
    if not raw_contents:
        fail("contents", "must not be empty")
    last_role = "user"
    for index, content in enumerate(raw_contents):
        last_role = conversation.add(content, f"contents.{index}")
    if last_role == "model":
        fail(f"contents.{len(raw_contents) - 1}.role", "a final model turn (prefill) is not supported")
    messages = conversation.messages
    system = _system(_get(body, "systemInstruction")) if _get(body, "systemInstruction") is not None else None
    tools = _tools(body["tools"]) if body.get("tools") is not None else []
    options: dict[str, Any] = {}
    native: dict[str, Any] = {}
    if _get(body, "toolConfig") is not None:
        options["tool_choice"], tools = _tool_choice(_get(body, "toolConfig"), tools)
    include = False
    if _get(body, "generationConfig") is not None:
        include = _generation(object_at(_get(body, "generationConfig"), "generationConfig"), options, native)
    if _get(body, "safetySettings") is not None:
        native["safetySettings"] = _safety(_get(body, "safetySettings"))
    if _get(body, "cachedContent") is not None:  # a Gemini cache's name: only a Gemini upstream has it
        native["cachedContent"] = string_at(_get(body, "cachedContent"), "cachedContent", empty=False)
    options["google"] = native or None
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
                             response_headers={"Content-Type": "application/json"}, resume_refused=ARRAY_NOT_RESUMABLE)  # fmt: skip
    return GeminiRequest(unified=unified, stream=stream, client_model=model, include_thoughts=include)

