"""The google-genai SDK's own lower-level entry points for `generate_content_stream`, used directly.

`AsyncModels.generate_content_stream` converts the whole request in Python on the event loop (its pydantic
`GenerateContentParameters`, then `_GenerateContentParameters_to_mldev`) and parses every streamed chunk
into a typed `GenerateContentResponse`. For a long history the first stalls every other stream; the second
costs ~12x the CPU per event of the other adapters. So the adapter does what the SDK's
`AsyncModels._generate_content_stream` does (google-genai 3.x, Gemini Developer API), in two halves:
- `sdk_request` runs the SDK's own conversion (same functions, same order) and returns the path and body,
  so it can run in a worker thread (`build_off_loop`);
- `send` hands them to the steps of the SDK's `BaseApiClient.async_request_streamed` (`app.seams.genai.stream_chunks`),
  which send them exactly as the SDK would (headers, API key, base URL, error pages → `APIError`, `{"error": …}`
  chunks → `APIError`), and yields each chunk as the wire JSON dict the SDK decoded (camelCase keys, signatures
  as base64 text) instead of a typed object.
Automatic function calling and continuation, which the adapter turns off, are the parts of the public
method left out. The SDK's private names used here are fenced in `app.seams.genai`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, AsyncGenerator
from urllib.parse import urlencode

from google.genai import types

from app.seams.genai import (
    ApiClient,
    GenerateContentParameters,
    convert_to_dict,
    encode_unserializable_types,
    parameters_to_wire,
    stream_chunks,
)

_PATH = "{model}:streamGenerateContent?alt=sse"
_COUNT_PATH = "{model}:countTokens"


@dataclass(frozen=True)
class SdkRequest:
    """A `streamGenerateContent` request as the SDK builds it: path, wire body and per-request options."""

    path: str
    body: dict[str, Any]
    http_options: types.HttpOptions | None


def sdk_request(client: ApiClient, params: dict[str, Any]) -> SdkRequest:
    """The SDK's conversion of `generate_content_stream(**params)` (raises ValueError when it refuses it)."""
    config = params.get("config")
    parameters = GenerateContentParameters(
        model=params["model"],
        contents=params["contents"],
        config=types.GenerateContentConfig(**config) if isinstance(config, dict) else config,
    )
    body = parameters_to_wire(client, parameters, None, parameters)
    url = body.get("_url")
    path = _PATH.format_map(url) if url else _PATH
    query = body.get("_query")
    if query:
        path = f"{path}?{urlencode(query)}"
    body.pop("config", None)
    body = encode_unserializable_types(convert_to_dict(body))
    http_options = parameters.config.http_options if parameters.config is not None else None
    return SdkRequest(path=path, body=body, http_options=http_options)


async def send(client: ApiClient, request: SdkRequest) -> AsyncGenerator[Any, None]:
    """Send the request as the SDK's streamed request method does (`stream_chunks`); the chunks as decoded JSON."""
    responses = await stream_chunks(client, "post", request.path, request.body, request.http_options)

    async def chunks() -> AsyncGenerator[Any, None]:
        try:
            async for chunk in responses:
                yield chunk
        finally:
            await responses.aclose()

    return chunks()


async def count(client: ApiClient, request: SdkRequest) -> Any:
    """`countTokens` for a converted request, in the shape of the client's API (`count_body`), through the SDK's
    own request method, like the stream. The answer's decoded JSON."""
    model = request.path.partition(":")[
        0
    ]  # `models/<id>` (Vertex AI: `publishers/google/models/<id>`), as the SDK put it
    payload = count_body(model, request.body, vertex=bool(client.vertexai))
    response = await client.async_request("post", _COUNT_PATH.format(model=model), payload, request.http_options)
    return json.loads(response.body) if response.body else {}


# What Vertex AI's `countTokens` takes (its `CountTokensRequest`: what the SDK's `count_tokens` sends with
# `vertexai=True`); it refuses any other field with 400 INVALID_ARGUMENT ("Unknown name …"): the Gemini API's
# `generateContentRequest` wrapper, and of a turn's body `toolConfig`, `safetySettings`, `labels`, `cachedContent`.
VERTEX_COUNTED = ("contents", "systemInstruction", "tools", "generationConfig")


def count_body(model: str, body: dict[str, Any], *, vertex: bool) -> dict[str, Any]:
    """The `countTokens` body for a turn's converted body, so the whole request (system instruction and tools
    included) is counted:
    - the Gemini Developer API: the turn's body as `generateContentRequest` (the SDK's `models.count_tokens`
      refuses a system instruction and tools there, although the endpoint counts them inside that wrapper);
    - Vertex AI: `contents`, `systemInstruction`, `tools` and `generationConfig` at the top level, as the SDK
      sends them (`VERTEX_COUNTED`)."""
    if vertex:
        return {key: body[key] for key in VERTEX_COUNTED if key in body}
    return {
        "generateContentRequest": {
            "model": model,
            **{key: value for key, value in body.items() if not key.startswith("_")},
        }
    }
