"""Google Gemini adapter (api `google-generative-ai`) on the official `google-genai` SDK.

The request goes through the SDK's lower-level entry points (`wire.py`): the SDK's own request conversion,
off the event loop for a long history, then the steps of its `async_request_streamed`; chunks are read as the
wire JSON the SDK decoded.

How the SDK is set up (google-genai 3.x):
- it is given the shared httpx2 client (`http_options.httpx_async_client`), our base URL and api version
  `v1beta`; no `retry_options`, so it sends each request once; automatic continuation and automatic function
  calling are off per request (see `request.build_request`; `wire.py` leaves them out altogether);
- the SDK passes its own (unset) timeout with every request, which would turn the client's timeouts off,
  so a request hook puts the client's timeouts back (and adds the attempt's trace context when tracing is on);
- closing the SDK's streamed chunks does not close the HTTP response under it (its inner generators are
  only finalised later), so a response hook remembers the responses of the current turn and `Upstream.aclose`
  closes them, which drops the connection at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from typing import Any

import httpx2
import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from app.contract.catalog_entries import ModelInfo
from app.contract.failures import ErrorKind
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import (
    RETRYABLE_STATUS,
    Placement,
    ProviderError,
    Upstream,
    build_off_loop,
    counted_tokens,
    error_text,
    retry_after_ms,
    retry_delay_ms,
)
from app.providers.config import ProviderConfig
from app.providers.google.events import GoogleTranslator
from app.providers.google.request import API, build_request, check_request
from app.providers.google.wire import SdkRequest, count, sdk_request, send
from app.providers.calls import UPSTREAM_HEADERS
from app.providers.transport import http_client, tag_demo_caller, transport_error
from app.seams.genai import api_base_url, api_client

# The HTTP responses opened for the current task's turn (set by `open`, filled by the response hook).
_RESPONSES: contextvars.ContextVar[list[httpx2.Response] | None] = contextvars.ContextVar(
    "google_responses", default=None
)


async def _remember_response(response: httpx2.Response) -> None:
    opened = _RESPONSES.get()
    if opened is not None:
        opened.append(response)


class GoogleProvider:
    api = API

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.name = config.name
        self._http = http_client(config.transport)
        timeouts = self._http.timeout.as_dict()

        async def prepare_request(request: httpx2.Request) -> None:
            request.extensions["timeout"] = timeouts
            headers = UPSTREAM_HEADERS.get()  # the attempt's trace context, when tracing is on
            if headers:
                request.headers.update(headers)

        self._http.event_hooks = {"request": [prepare_request, tag_demo_caller], "response": [_remember_response]}
        self.client = self.new_client(config, self._http)

    def new_client(self, config: ProviderConfig, http: httpx2.AsyncClient) -> genai.Client:
        """The SDK client on the Gemini Developer API (Vertex AI: `app.providers.clouds.vertex.gemini`)."""
        return genai.Client(
            api_key=config.api_key,
            vertexai=False,
            http_options=types.HttpOptions(
                base_url=config.base_url or None, api_version="v1beta", httpx_async_client=http
            ),
        )

    @property
    def base_url(self) -> str:
        """Where the requests go (the vendor's default unless configured)."""
        return api_base_url(self.client)

    @property
    def placement(self) -> Placement | None:
        """The cloud and region its api runs on (catalog `cloud`), None at Google's Gemini API."""
        return self.config.placement

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        request = await build_off_loop(self._sdk_request, model, context, options)
        opened: list[httpx2.Response] = []
        _RESPONSES.set(opened)

        async def close_responses() -> None:
            for response in opened:
                await response.aclose()

        try:
            chunks = await send(api_client(self.client), request)
        except BaseException:  # an error page, a transport failure or a cancel: nothing is left open
            await asyncio.shield(close_responses())
            raise

        async def close() -> None:
            try:
                await chunks.aclose()
            finally:
                await close_responses()

        return Upstream(chunks.__aiter__(), close)

    def _sdk_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> SdkRequest:
        """The request as the SDK converts it (run off the event loop for a long history: see `wire`)."""
        params = build_request(model, context, options)
        try:
            return sdk_request(api_client(self.client), params)
        except ValueError as exc:  # the SDK checks the call before sending it (pydantic errors are ValueErrors)
            raise ProviderError(
                f"cannot be sent this request: the google-genai SDK refused it ({error_text(str(exc))})",
                kind=ErrorKind.REQUEST,
            ) from None

    def translator(self, model: ModelInfo) -> GoogleTranslator:
        return GoogleTranslator()

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """`countTokens` with the turn's own request (contents, system instruction, tools): `totalTokens`."""
        request = await build_off_loop(self._sdk_request, model, context, options)
        return counted_tokens(await count(api_client(self.client), request), "totalTokens")

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        check_request(model, context, options)

    def error(self, exc: BaseException) -> ProviderError | None:
        if isinstance(exc, genai_errors.APIError):
            message = exc.message or "no error details"
            if not (isinstance(exc.details, dict) and "error" in exc.details):  # the body was not JSON: raw text
                message = error_text(message)
            detail = f"{exc.status or 'error'}: {message}"
            http_status = getattr(exc.response, "status_code", None)
            if http_status is not None and http_status != 200:
                headers = getattr(exc.response, "headers", None)
                return ProviderError(
                    f"returned HTTP {http_status}: {detail}",
                    status=http_status,
                    retry_after_ms=retry_after_ms(headers) or _retry_info_ms(exc.details),
                    retryable=http_status in RETRYABLE_STATUS,
                    kind="http",
                )
            # An `{"error": …}` chunk inside a 200 stream, raised by the SDK.
            return ProviderError(
                f"sent an error chunk: {exc.code} {detail}",
                retry_after_ms=_retry_info_ms(exc.details),
                retryable=exc.code is None or exc.code in RETRYABLE_STATUS,
            )
        if isinstance(exc, (genai_errors.UnknownApiResponseError, pydantic.ValidationError)):
            return ProviderError(
                f"sent a chunk the SDK could not read: {str(exc)[:300]}", retryable=True, kind="malformed"
            )
        return transport_error(exc)

    async def aclose(self) -> None:
        await self.client.aio.aclose()
        self.client.close()  # the sync client the SDK made for itself
        await self._http.aclose()


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _retry_info_ms(details: Any) -> int | None:
    """Milliseconds from a `google.rpc.RetryInfo` detail (`"retryDelay": "37s"`) in an error body."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details") or [] if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return retry_delay_ms(float(match.group(1)))
    return None
