"""Anthropic Messages on Amazon Bedrock (a catalog provider with `cloud: {kind: "bedrock", region}`), through the
official SDK's Bedrock client (`anthropic.AsyncAnthropicBedrock`, the `anthropic[bedrock]` extra).

The request body, the events and their translation are the Anthropic adapter's; what differs is what the SDK's
Bedrock client does with the call:

- the path: the body's `model` (the catalog model id: a Bedrock model id such as
  `anthropic.claude-sonnet-4-5-20250929-v1:0`, an inference profile `us.anthropic.…`, or an ARN) goes into
  `POST /model/{modelId}/invoke-with-response-stream`, `stream` leaves the body, `anthropic_version` and the
  `anthropic-beta` flags (`anthropic_beta`) join it;
- credentials: only the standard AWS chain, read by botocore (environment, shared config and credentials files
  and `AWS_PROFILE`, `credential_process`, web identity for Kubernetes service accounts (IRSA), container and
  instance roles); refreshable credentials (web identity, assumed roles, `credential_process` with an
  `Expiration`) are refreshed by botocore before they expire; each request is signed with botocore's SigV4
  (service `bedrock`, the entry's region) in a worker thread, as the SDK signs it, with one difference
  (`SigningBedrockClient`): the signature is made from *frozen* credentials, as botocore's own clients make it;
- the body: `application/vnd.amazon.eventstream` binary frames (length prelude, headers, payload, CRC32s),
  decoded by botocore's own `EventStreamBuffer` into the same Anthropic events; an `exception` frame
  (`throttlingException`, `modelStreamErrorException`, …) is an error event.

The HTTP client is httpx2's own, not the aiohttp one the other Stainless adapters use: a SigV4 signature covers
the path byte for byte, and aiohttp re-quotes the URL it is given (`%3D` goes out as `=`), so a model id with
such a character would reach the service under another path than the one signed.

The base URL is Bedrock's runtime endpoint for the region unless the catalog's `baseUrl` or
`GATEWAY_<NAME>_BASE_URL` names another (a VPC endpoint, the simulator). A frame is bounded by botocore's
decoder (128 KiB of headers, 24 MiB of payload), not by `GATEWAY_MAX_UPSTREAM_EVENT_BYTES`, which counts SSE
lines: an event-stream body has none. Every other body, which the SDK reads whole (an error body, a token
count's answer), is bounded by `GATEWAY_MAX_UPSTREAM_EVENT_BYTES` in all (`bound_whole_bodies`): a longer one
ends the attempt with kind `event_too_large` and its HTTP status.

Token counts: Bedrock's `CountTokens` (`count_tokens`), which the SDK's Bedrock client does not call.
"""

from __future__ import annotations

import base64
import itertools
import re
import urllib.parse
import uuid
from typing import Any

import anthropic
import botocore.eventstream
import botocore.exceptions
import httpx2
import orjson

from app.contract.catalog_entries import ModelInfo
from app.contract.failures import ErrorKind
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic import AnthropicProvider
from app.providers.base import (
    RETRYABLE_STATUS,
    ProviderError,
    build_off_loop,
    counted_tokens,
    error_detail,
    retry_after_ms,
)
from app.providers.config import ProviderConfig
from app.providers.transport import bound_whole_bodies, client_options
from app.seams.bedrock import SigningBedrockClient
from app.seams.stainless import AnthropicRequestOptions

EVENT_STREAM = "application/vnd.amazon.eventstream"  # a streamed turn's body (any other is read whole)
# Bedrock's exceptions (the `x-amzn-ErrorType` of an HTTP error, the `:exception-type` of an in-stream one,
# lower camel case there) and the HTTP status each one is: in-stream ones arrive inside a 200.
EXCEPTION_STATUS = {
    "throttlingexception": 429,
    "modelnotreadyexception": 429,
    "servicequotaexceededexception": 429,
    "modeltimeoutexception": 408,
    "internalserverexception": 500,
    "modelstreamerrorexception": 500,
    "serviceunavailableexception": 503,
    "validationexception": 400,
    "resourcenotfoundexception": 404,
    "accessdeniedexception": 403,
}
# What may not leave the gateway of a cloud's error text: ARNs (they carry the account id and role names) and
# access key ids (`AKIA…` long-term, `ASIA…` temporary).
_ARN = re.compile(r"arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:\d{12}:[^\s,;\"']*")
_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA)[A-Z0-9]{12,}\b")


# A cross-region inference profile is a foundation model id behind a geography (`us.anthropic.…`, also inside
# a system inference profile's ARN); `CountTokens` takes the foundation model.
_PROFILE = re.compile(
    r"^(?:arn:aws[a-z-]*:bedrock:[a-z0-9-]*:\d{12}:inference-profile/)?(?:us|us-gov|eu|apac|jp|au|ca|global)\.(?=anthropic\.)"
)


def foundation_model(model_id: str) -> str:
    """The foundation model id of a Bedrock model id: an inference profile's without its geography; any other
    id (a foundation model, its ARN, an application inference profile's ARN) as it is."""
    return _PROFILE.sub("", model_id)


def cloud_text(text: str) -> str:
    """`text` without ARNs and access key ids (Bedrock and STS put them in their error messages)."""
    return _ACCESS_KEY_ID.sub("[access key id]", _ARN.sub("[arn]", text))


class BedrockProvider(AnthropicProvider):
    """One catalog provider whose `anthropic-messages` api runs on Amazon Bedrock."""

    client_class = SigningBedrockClient

    def __init__(self, config: ProviderConfig) -> None:
        assert config.cloud is not None
        self.config = config
        self.name = config.name
        self.region = config.cloud.region
        self.client = SigningBedrockClient(
            aws_region=self.region,
            base_url=config.base_url,
            max_retries=0,  # the dispatcher retries
            http_client=bound_whole_bodies(
                httpx2.AsyncClient(**client_options(config.transport)),
                config.transport.max_event_bytes,
                EVENT_STREAM,
            ),
        )
        # A relative path: the SDK's Bedrock client turns `/v1/messages` with a JSON body into its invoke path.
        self._options = AnthropicRequestOptions.construct(method="post", url=self.path)
        self._stream_cls = anthropic.AsyncStream[object]
        keys = f"stainless-python-retry-{uuid.uuid4()}"
        self._idempotency_keys = (f"{keys}-{n}" for n in itertools.count())

    def encoded_body(self, model: ModelInfo, context: Context, options: StreamOptions) -> Any:
        """The body as a dict: the SDK's Bedrock client moves `model` and `stream` out of it into the path."""
        return self.build_request(model, context, options)

    def request_options(self, body: Any, headers: dict[str, str] | None = None) -> Any:
        """The shared options with the body as `json_data` (which the SDK's Bedrock client rewrites), not bytes."""
        return super().request_options(body, headers).model_copy(update={"content": None, "json_data": body})

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """Bedrock's `CountTokens` (`POST /model/{modelId}/count-tokens`) of the InvokeModel body a turn would send
        (the SDK's own conversion, base64 in `input.invokeModel.body`), signed as a turn is; an inference profile
        is counted on its foundation model (`foundation_model`). The answer is `{"inputTokens": N}`."""
        params = await build_off_loop(self.build_request, model, context, options)
        body = await self.client.invoke_body(self.request_options(params, self.request_headers(options)))
        encoded = base64.b64encode(orjson.dumps(body)).decode()
        path = f"/model/{urllib.parse.quote(foundation_model(params['model']), safe=':;')}/count-tokens"
        answer = await self.client.post_signed_json(path, orjson.dumps({"input": {"invokeModel": {"body": encoded}}}))
        return counted_tokens(answer, "inputTokens")

    def error(self, exc: BaseException) -> ProviderError | None:
        """Bedrock's failures with its reason (the exception name) and request id, without ARNs or key ids."""
        if isinstance(exc, anthropic.APIStatusError):
            return _status_error(exc)
        if isinstance(exc, botocore.eventstream.ParserError):
            too_large = isinstance(
                exc, (botocore.eventstream.InvalidHeadersLength, botocore.eventstream.InvalidPayloadLength)
            )
            return ProviderError(
                f"sent an event-stream frame the gateway could not read: {type(exc).__name__}: {exc}",
                retryable=True,
                kind=ErrorKind.EVENT_TOO_LARGE if too_large else ErrorKind.MALFORMED,
            )
        if isinstance(exc, botocore.exceptions.BotoCoreError):  # the credential chain failed (or found nothing)
            return ProviderError(
                f"could not sign the request for Bedrock: {cloud_text(str(exc))}", kind=ErrorKind.REQUEST
            )
        if isinstance(exc, (KeyError, ValueError)) and _raised_in(exc, "botocore", "base64", "binascii"):
            return ProviderError(
                f"sent an event-stream frame the gateway could not read: {type(exc).__name__}: {exc}",
                retryable=True,
                kind=ErrorKind.MALFORMED,
            )
        return super().error(exc)


def _status_error(exc: Any) -> ProviderError:
    headers = exc.response.headers
    request_id = headers.get("x-amzn-requestid")
    if exc.status_code == 200:  # an exception frame inside the stream
        error = exc.body.get("error", {}) if isinstance(exc.body, dict) else {}
        reason = str(error.get("type") or "exception")
        message = str(error.get("message") or "")
        status = EXCEPTION_STATUS.get(reason.lower())
        return ProviderError(
            cloud_text(f"sent {reason}: {message}{_request_id(request_id)}"),
            status=status if status in RETRYABLE_STATUS else None,  # a throttling in the stream is a 429
            retryable=status is None or status in RETRYABLE_STATUS,
        )
    reason = (headers.get("x-amzn-errortype") or "").split(":")[0]
    detail = _message(exc.body) if reason else error_detail(exc.body)
    return ProviderError(
        cloud_text(
            f"returned HTTP {exc.status_code} {reason or ''}{': ' if reason else ''}{detail}{_request_id(request_id)}"
        ),
        status=exc.status_code,
        retry_after_ms=retry_after_ms(headers),
        retryable=exc.status_code in RETRYABLE_STATUS,
        kind=ErrorKind.HTTP,
    )


def _message(body: Any) -> str:
    """Bedrock's error body is `{"message": …}` (sometimes `Message`)."""
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return error_detail(body)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("Message") or error_detail(body))
    return error_detail(body)


def _request_id(request_id: str | None) -> str:
    return f" (request id {request_id})" if request_id else ""


def _raised_in(exc: BaseException, *modules: str) -> bool:
    """Whether the innermost frame of `exc`'s traceback is in one of `modules` (or their submodules)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    name = str(tb.tb_frame.f_globals.get("__name__", ""))
    return any(name == m or name.startswith(m + ".") for m in modules)
