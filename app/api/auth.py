"""Who is calling, at the edge: the credentials a request presents, read from its headers.

`Authorization: Bearer <key>`, or `x-api-key: <key>` (what the Anthropic SDKs send). The keys themselves
are checked by `app.policy.keyring.KeyRing`, which raises `NotAuthenticated`; the edge answers it 401
(`app.api.error_responses.refusal_error`).
"""

from __future__ import annotations

from typing import Mapping

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def authorization(headers: Mapping[str, str]) -> str | None:
    """The credentials a request presents, as an Authorization value for `identify`: its `Authorization`
    header (OpenAI SDKs, curl), or else its `x-api-key` header as a bearer token (Anthropic SDKs)."""
    value = headers.get("authorization")
    if value is None and (api_key := headers.get("x-api-key")) is not None:
        return f"Bearer {api_key}"
    return value
