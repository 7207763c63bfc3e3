"""Anthropic Messages adapter (api `anthropic-messages`) on the official `anthropic` SDK's raw event stream."""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic._models import FinalRequestOptions

from app.catalog import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic.events import AnthropicTranslator
from app.providers.anthropic.request import API, build_request, check_request, request_headers
from app.providers.stainless import StainlessProvider


class AnthropicProvider(StainlessProvider):
    api = API
    sdk = anthropic
    client_class = anthropic.AsyncAnthropic
    options_class = FinalRequestOptions
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
