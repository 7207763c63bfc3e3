"""OpenAI Responses adapter (api `openai-responses`) on the official `openai` SDK's raw event stream
(`client.responses.create(..., stream=True)`, not the accumulating `responses.stream()` helper)."""

from __future__ import annotations


import openai
from openai import AsyncStream

from app.catalog import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import ProviderError, Upstream
from app.providers.openai.events import OpenAIResponsesTranslator
from app.providers.openai.request import API, build_params
from app.providers.transport import TransportSettings, client_options, stainless_error


class OpenAIResponsesProvider:
    api = API

    def __init__(self, name: str, api_key: str, base_url: str | None, transport: TransportSettings) -> None:
        self.name = name
        self.client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(**client_options(transport)),
        )

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        """POST /responses with `stream: true` through the SDK (auth, SSE decoding, in-band error events,
        status errors) but with untyped events: the translator reads plain dicts, and building the SDK's
        pydantic event objects would dominate the gateway's CPU per streamed event."""
        stream = await self.client.post(
            "/responses", body=build_params(model, context, options), cast_to=object, stream=True,
            stream_cls=AsyncStream[object],
        )
        return Upstream(stream.__aiter__(), stream.close)

    def translator(self, model: ModelInfo) -> OpenAIResponsesTranslator:
        return OpenAIResponsesTranslator()

    def error(self, exc: BaseException) -> ProviderError | None:
        return stainless_error(exc, openai)

    async def aclose(self) -> None:
        await self.client.close()

