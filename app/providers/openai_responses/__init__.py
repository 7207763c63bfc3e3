"""OpenAI Responses adapter (api `openai-responses`) on the official `openai` SDK's raw event stream
(`POST /responses` with `stream: true`, not the accumulating `responses.stream()` helper)."""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import openai

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.openai_responses.events import OpenAIResponsesTranslator
from app.providers.base import build_off_loop
from app.providers.openai_responses.request import API, build_request, check_request
from app.providers.stainless import StainlessProvider
from app.seams.stainless import OpenAIRequestOptions

# The fields of the turn's body that `POST /responses/input_tokens` takes besides `model` and `input` (it
# refuses the others: `stream`, `store`, `include`, `max_output_tokens`, sampling, `prompt_cache_key`).
COUNTED_FIELDS = ("instructions", "tools", "tool_choice", "reasoning", "text", "parallel_tool_calls", "truncation")


class OpenAIResponsesProvider(StainlessProvider):
    api = API
    sdk: ClassVar[ModuleType] = openai  # (a module assigned bare is an instance variable to mypy)
    client_class = openai.AsyncOpenAI
    options_class = OpenAIRequestOptions
    path = "/responses"

    def build_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
        return build_request(model, context, options)

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        check_request(model, context, options)

    def translator(self, model: ModelInfo) -> OpenAIResponsesTranslator:
        return OpenAIResponsesTranslator()

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """`responses.input_tokens.count` with the turn's own body (same input, instructions, tools, reasoning)."""
        params = await build_off_loop(build_request, model, context, options)
        counted = {name: params[name] for name in COUNTED_FIELDS if name in params}
        result = await self.client.responses.input_tokens.count(
            model=params["model"], input=params["input"], extra_body=counted
        )
        return result.input_tokens
