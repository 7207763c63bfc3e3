"""Anthropic Messages adapter (api `anthropic-messages`) on the official `anthropic` SDK's raw event stream."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, ClassVar

import anthropic

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic.events import AnthropicTranslator
from app.providers.anthropic.request import API, build_request, check_request, request_headers
from app.providers.base import build_off_loop
from app.providers.stainless import StainlessProvider
from app.seams.stainless import AnthropicRequestOptions

# The fields of the turn's body that the counting endpoint takes besides `model` and `messages` (it refuses
# the others: `max_tokens`, `stream`, sampling, `stop_sequences`, `metadata`).
COUNTED_FIELDS = ("system", "tools", "tool_choice", "thinking", "output_config", "context_management", "mcp_servers")


class AnthropicProvider(StainlessProvider):
    api = API
    sdk: ClassVar[ModuleType] = anthropic  # (a module assigned bare is an instance variable to mypy)
    client_class: ClassVar[Callable[..., Any]] = anthropic.AsyncAnthropic
    options_class = AnthropicRequestOptions
    path = "/v1/messages"

    def build_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
        params = build_request(model, context, options)
        params.update(params.pop("extra_body", None) or {})
        return params

    def request_headers(self, options: StreamOptions) -> dict[str, str] | None:
        return request_headers(options)

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        check_request(model, context, options)

    def translator(self, model: ModelInfo) -> AnthropicTranslator:
        return AnthropicTranslator()

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """`messages.count_tokens` with the turn's own body (same messages, system, tools, thinking)."""
        params = await build_off_loop(build_request, model, context, options)
        counted = {name: params[name] for name in COUNTED_FIELDS if name in params}
        result = await self.client.messages.count_tokens(
            model=params["model"], messages=params["messages"], extra_body=counted
        )
        return result.input_tokens
