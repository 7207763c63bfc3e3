"""Who is calling, at the edge: the credentials a request presents, read from its headers.

`Authorization: Bearer <key>`, or `x-api-key: <key>` (what the Anthropic SDKs send), or `x-goog-api-key: <key>`
(the Google GenAI SDKs), or on the Gemini door's routes the `key` query parameter (Google's `?key=`). The keys themselves
are checked by `app.policy.keyring.KeyRing`, which raises `NotAuthenticated`; the edge answers it 401
(`app.api.error_responses.refusal_error`).
"""

from __future__ import annotations

from typing import Mapping

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def authorization(headers: Mapping[str, str], query: Mapping[str, str] | None = None) -> str | None:
    """The credentials a request presents, as an Authorization value for `identify`: its `Authorization`
    header (OpenAI SDKs, curl), or else its `x-api-key` (Anthropic SDKs) or `x-goog-api-key` header (Google
    GenAI SDKs) as a bearer token, or else the `key` of `query` (given only on routes that take a key there)."""
    value = headers.get("authorization")
    if value is not None:
        return value
    api_key = (
        headers.get("x-api-key") or headers.get("x-goog-api-key") or (query.get("key") if query is not None else None)
    )
    return f"Bearer {api_key}" if api_key is not None else None
