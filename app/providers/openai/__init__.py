"""OpenAI Responses adapter (api `openai-responses`) on the official `openai` SDK's raw event stream
(`client.responses.create(..., stream=True)`, not the accumulating `responses.stream()` helper)."""

from __future__ import annotations


import openai
from openai import AsyncStream

from app.catalog import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import RETRYABLE_STATUS, ProviderError, Upstream, error_detail, retry_after_ms
from app.providers.openai.events import OpenAIResponsesTranslator
from app.providers.openai.request import API, build_params
from app.providers.transport import TransportSettings, http_client, transport_error


class OpenAIResponsesProvider:
    api = API

    def __init__(self, name: str, api_key: str, base_url: str | None, transport: TransportSettings) -> None:
        self.name = name
        self.client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, http_client=http_client(transport)
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
        if isinstance(exc, openai.APIStatusError):
            return ProviderError(
                f"returned HTTP {exc.status_code}: {error_detail(exc.body)}",
                status=exc.status_code,
                retry_after_ms=retry_after_ms(exc.response.headers),
                retryable=exc.status_code in RETRYABLE_STATUS,
                kind="http",
            )
        if isinstance(exc, openai.APIConnectionError):
            error = transport_error(exc.__cause__) if exc.__cause__ is not None else None
            return error or ProviderError(f"connection failed: {exc.message}", retryable=True, kind="connect")
        if isinstance(exc, openai.APIError):  # an in-band `{"error": {...}}` frame, raised by the SDK
            return ProviderError(f"sent an error event: {error_detail(exc.body)}", retryable=True)
        return transport_error(exc)

    async def aclose(self) -> None:
        await self.client.close()

