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

import importlib
from typing import Any

__all__ = ["absolute_url"]  # and, through `__getattr__`, AnthropicRequestOptions and OpenAIRequestOptions

# Each SDK's `FinalRequestOptions`, imported when an adapter first names it (module `__getattr__`, PEP 562): the
# Anthropic adapter then imports no `openai`, the OpenAI ones no `anthropic` (start-up, docs/performance.md).
_OPTIONS = {"AnthropicRequestOptions": "anthropic._models", "OpenAIRequestOptions": "openai._models"}


def __getattr__(name: str) -> Any:
    if name not in _OPTIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    options = importlib.import_module(_OPTIONS[name]).FinalRequestOptions
    globals()[name] = options  # found directly from now on
    return options


def absolute_url(client: Any, path: str) -> str:
    """`path` (relative to the client's base URL) as the absolute URL the SDK would request."""
    return str(client._prepare_url(path))
