"""OpenAI Chat Completions adapter (api `openai-completions`) on the official `openai` SDK's raw chunk stream
(`POST /chat/completions` with `stream: true`, untyped and back-pressured like the Responses adapter).

One adapter serves every vendor and local server that speaks the format; what differs between them is data,
the catalog provider's `compat` (`app.providers.openai_completions.compat.Compat`).
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any, ClassVar

import openai

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.config import ProviderConfig
from app.providers.openai_completions import request
from app.providers.openai_completions.compat import Compat
from app.providers.openai_completions.events import ChatCompletionsTranslator
from app.providers.stainless import StainlessProvider
from app.seams.stainless import OpenAIRequestOptions

NO_KEY = "no-key"  # sent to servers that need none (the SDK insists on some key)


class OpenAICompletionsProvider(StainlessProvider):
    api = request.API
    sdk: ClassVar[ModuleType] = openai  # (a module assigned bare is an instance variable to mypy)
    client_class = openai.AsyncOpenAI
    options_class = OpenAIRequestOptions
    path = "/chat/completions"

    def __init__(self, config: ProviderConfig) -> None:
        self.rules = Compat.parse(config.compat)  # first: a bad catalog entry fails before a client is made
        super().__init__(replace(config, api_key=config.api_key or NO_KEY))

    def build_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
        return request.build_request(model, context, options, self.rules)

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        request.check_request(model, context, options, self.rules)

    def translator(self, model: ModelInfo) -> ChatCompletionsTranslator:
        return ChatCompletionsTranslator()
