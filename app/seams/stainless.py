"""Private names of the Stainless-generated SDKs (`anthropic`, `openai`), used by `app.providers.stainless`.

Both SDKs have the same private layout, so one seam serves them:

- `FinalRequestOptions` (`anthropic._models`, `openai._models`): the options object of one request. The
  public path, `client.post()`, builds one per call (about 35 µs: pydantic deep-copies every field's default)
  and draws an idempotency key from `uuid4()`; the adapter builds one template per provider
  (`FinalRequestOptions.construct(method=, url=)`) and shallow-copies it per call (`model_copy(update=)` of
  `content`, `idempotency_key`, `headers`), which is what the SDK itself does per attempt. The template is then
  sent with the client's `request(cast_to, options, stream=, stream_cls=)`, the method `post()` ends in.
- `client._prepare_url(path)`: the SDK's own merge of an endpoint path into the client's base URL. Done once
  per provider, so that per call the SDK parses an absolute URL instead of parsing and merging a path.
"""

from __future__ import annotations

from typing import Any

from anthropic._models import FinalRequestOptions as AnthropicRequestOptions
from openai._models import FinalRequestOptions as OpenAIRequestOptions

__all__ = ["AnthropicRequestOptions", "OpenAIRequestOptions", "absolute_url"]


def absolute_url(client: Any, path: str) -> str:
    """`path` (relative to the client's base URL) as the absolute URL the SDK would request."""
    return str(client._prepare_url(path))
