"""OpenAI Responses adapter (api `openai-responses`) on the official `openai` SDK's raw event stream
(`POST /responses` with `stream: true`, not the accumulating `responses.stream()` helper)."""

from __future__ import annotations

from typing import Any

import openai
from openai._models import FinalRequestOptions

from app.catalog import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.openai.events import OpenAIResponsesTranslator
from app.providers.openai.request import API, build_request, check_request
from app.providers.stainless import StainlessProvider


class OpenAIResponsesProvider(StainlessProvider):
    api = API
    sdk = openai
    client_class = openai.AsyncOpenAI
    options_class = FinalRequestOptions
    path = "/responses"

    def build_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
        return build_request(model, context, options)

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        check_request(model, context, options)

    def translator(self, model: ModelInfo) -> OpenAIResponsesTranslator:
        return OpenAIResponsesTranslator()
