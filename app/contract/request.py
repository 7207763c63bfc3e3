"""The unified request (`/v1/stream`, `/v1/complete`) and the pi-compatible one (`/api/stream`)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from app.contract.messages import Context, WireModel, door_only

Reasoning = Literal["minimal", "low", "medium", "high", "xhigh"]

# A model name as a client writes it: "<provider>/<model id>", a catalog route or alias, or a bare model id
# (resolved by `app.catalog.resolve`). Ids may contain `/` (`groq/openai/gpt-oss-120b`).
MODEL_REF_PATTERN = r"^[A-Za-z0-9][^\s]*$"
MODEL_NAME_DOC = (
    '"<provider>/<model id>" (the id may contain "/"), a catalog route ("fast"), an alias, '
    "or a bare model id that exactly one configured provider lists"
)
ModelName = Annotated[str, Field(pattern=MODEL_REF_PATTERN, max_length=512, description=MODEL_NAME_DOC)]

# Where a request holds text a person wrote (message text, the system prompt): there the body parser removes
# lone UTF-16 surrogates, anywhere else it refuses them (app.api.body). "*" stands for any list index.
CONTEXT_PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("context", "systemPrompt"),
    ("context", "messages", "*", "content"),
    ("context", "messages", "*", "content", "*", "text"),
)


class ToolChoiceTool(WireModel):
    """Force one named tool."""

    type: Literal["tool"]
    name: str = Field(min_length=1, max_length=256)


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceTool


class WebSearch(WireModel):
    """The client asked for the vendor's hosted web search (docs/adapters/web-search.md)."""

    external_web_access: bool = Field(
        default=True,
        description="false: results from the vendor's cache or index only, never a live fetch "
        "(only OpenAI offers that; elsewhere the tool is then dropped)",
    )


class HostedToolsOption(WireModel):
    """Hosted tools the client asked for: each is served by the vendor's own equivalent where the catalog allows
    it for the serving model, otherwise dropped and named in `X-Gateway-Dropped-Tools`; never refused."""

    web_search: WebSearch | None = None


class StreamOptions(WireModel):
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(
        default=None, ge=0.0, le=1.0, description="nucleus sampling; a vendor that cannot honour it refuses with 400"
    )
    reasoning: Reasoning | None = None
    throttle_ms: int | None = Field(default=None, ge=0, le=10_000, description="0 turns delta coalescing off")
    session_id: str | None = Field(default=None, max_length=256)
    metadata: dict[str, Any] | None = None
    stop: list[Annotated[str, Field(min_length=1, max_length=1000)]] | None = Field(
        default=None, max_length=16, description="stop sequences; a vendor that cannot honour them refuses with 400"
    )
    tool_choice: ToolChoice | None = Field(
        default=None, description='"auto" (default), "none", "required" (some tool), or {"type": "tool", "name"}'
    )
    partial_arguments: bool = Field(
        default=False, description="add `partialArguments` (the arguments parsed so far) to each toolcall_delta"
    )
    json_object: bool = Field(
        default=False,
        description="JSON mode: the answer's text is one JSON object, with no schema (OpenAI `json_object`, Gemini "
        "`responseMimeType: application/json`); a vendor without it (Anthropic) refuses with 400. A door's JSON "
        "schema, when there is one, wins",
    )
    resumable: bool = Field(
        default=False,
        description="keep the events so a disconnected client can continue with GET /v1/stream/{requestId} and "
        "Last-Event-ID; a disconnect then cancels the upstream only after GATEWAY_RESUME_GRACE seconds without a reader",
    )
    hosted_tools: HostedToolsOption | None = Field(
        default=None,
        description="hosted tools run by the vendor (web search) where the catalog allows them; "
        "what is not served is named in the X-Gateway-Dropped-Tools response header",
    )
    # Sampling fields apps moving from the OpenAI API send (docs/api.md, "Sampling fields and drop_params"): each
    # reaches the vendors whose api honours it with its meaning intact (`app.providers.sampling`); a vendor that
    # cannot refuses the turn with 400, unless `dropParams` (or the key's or the route's setting) drops it.
    seed: int | None = Field(default=None, description="deterministic sampling where the vendor offers it")
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: dict[str, Annotated[float, Field(ge=-100, le=100)]] | None = Field(
        default=None, description="token id → bias, OpenAI's meaning (Chat Completions vendors only)"
    )
    drop_params: bool = Field(
        default=False,
        description="send the turn without the fields the serving vendor cannot honour instead of refusing it; "
        "they are named in the X-Gateway-Dropped-Params response header and the record",
    )
    # Door-only: fields the client sent that no vendor honours through the gateway (Chat Completions `n`,
    # `logprobs`, …), in the client's own spelling: the gateway refuses the turn naming the first, unless the
    # turn drops params, then they are named as dropped.
    unhonoured: SkipJsonSchema[list[str] | None] = Field(default=None, exclude=True)
    # Door-only (absent from the public schema, never serialized): what a door's client sent that one api alone
    # reads, keyed by that api's name (the catalog's `api`), which its adapter sends as it came; every other
    # adapter works from the unified options, which the door derived from the same fields (`passthrough_for`):
    # - `anthropic-messages`: the top-level Anthropic Messages fields an Anthropic client sent (`thinking`,
    #   `output_config`, `context_management`, …) and its `anthropic-beta` flags (`betas`); a door's JSON schema
    #   as `output_config.format`;
    # - `google-generative-ai`: what a Gemini client sent that only Gemini reads, in Gemini's JSON spelling
    #   (`safetySettings`, `cachedContent`, `topK`, `topP` with thinking, `thinkingConfig` as sent;
    #   docs/doors/gemini.md).
    passthrough: SkipJsonSchema[dict[str, dict[str, Any]] | None] = Field(default=None, exclude=True)
    # Door-only: the JSON schema the answer's text must follow (Anthropic `output_config.format`), sent as each
    # vendor's structured output (OpenAI `text.format`, Chat Completions `response_format`, Gemini
    # `responseJsonSchema`; Anthropic gets `output_config` as it came).
    json_schema: SkipJsonSchema[dict[str, Any] | None] = Field(default=None, exclude=True)
    # Door-only: `False` asks for at most one tool call per turn (OpenAI `parallel_tool_calls: false`, Anthropic
    # `disable_parallel_tool_use`); Gemini has no such switch and gets nothing. None: the vendor's default.
    parallel_tool_calls: SkipJsonSchema[bool | None] = Field(default=None, exclude=True)

    _door_fields = field_validator("passthrough", "json_schema", "parallel_tool_calls", "unhonoured", mode="before")(
        door_only
    )

    def passthrough_for(self, api: str) -> dict[str, Any]:
        """What a door passes through to `api`'s adapter as its client sent it ({} for nothing)."""
        return (self.passthrough or {}).get(api) or {}


class StreamRequest(WireModel):
    PROSE_PATHS: ClassVar[tuple[tuple[str, ...], ...]] = CONTEXT_PROSE_PATHS
    BULK_LIST: ClassVar[tuple[str, ...]] = ("context", "messages")  # validated in slices when long (app.api.body)

    model: ModelName
    fallback: list[ModelName] = Field(
        default_factory=list, max_length=8, description="tried in order when an attempt fails before any content"
    )
    context: Context
    options: StreamOptions = Field(default_factory=StreamOptions)


class PiModel(WireModel):
    """pi's Model JSON. Only `provider` and `id` are used; `baseUrl` and `headers` are ignored on purpose."""

    provider: str = Field(min_length=1)
    id: str = Field(min_length=1)


class PiOptions(WireModel):
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    reasoning: Reasoning | None = None


class PiStreamRequest(WireModel):
    PROSE_PATHS: ClassVar[tuple[tuple[str, ...], ...]] = CONTEXT_PROSE_PATHS
    BULK_LIST: ClassVar[tuple[str, ...]] = ("context", "messages")  # validated in slices when long (app.api.body)

    model: PiModel
    context: Context
    options: PiOptions = Field(default_factory=PiOptions)

    def unified(self) -> StreamRequest:
        return StreamRequest(
            model=f"{self.model.provider}/{self.model.id}",
            context=self.context,
            options=StreamOptions(
                temperature=self.options.temperature,
                max_tokens=self.options.max_tokens,
                reasoning=self.options.reasoning,
            ),
        )
