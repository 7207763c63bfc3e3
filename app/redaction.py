"""The secrets the gateway must never show (provider and client keys), and `redact`, which takes them out of text.

Keys are registered once where they are configured (`app.gateway`: the built-in providers' and the clients'
keys; `app.providers.registry`: every served catalog provider's key, `keyEnv` ones included). Two places
apply `redact`, so nothing the gateway emits or stores carries a key: `ProviderError` (every upstream failure
text enters the gateway there: error events, door error bodies, records and metrics read it from there) and the
log formatter (`app.telemetry.logs`), for anything else that reaches a log line.

A key can also come in a URL the gateway never registered: Google's clients send theirs as the `key` query
parameter (`?key=`), a wrong key or one from the keys file alike. `redact` blanks the value of every `key`
parameter in the text it is given, whatever the value, so the access log line (uvicorn's, through the same
formatter) shows `?key=[redacted]`. The parameter's name is matched as a URL parser reads it: in any case and
percent-encoded (`%6Bey=` is a `key` to Starlette too).
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words

_SECRETS: set[str] = set()

# `?key=…` / `&key=…` up to the next separator; the name in any case, any of its letters percent-encoded.
_QUERY_KEY = re.compile(r"""([?&](?:k|%6b)(?:e|%65)(?:y|%79)=)[^&#\s\\"'<>]*""", re.IGNORECASE)


def register_secrets(*values: str | None) -> None:
    """Strings never to be shown (keys). Values shorter than `MIN_SECRET_LENGTH` are ignored."""
    _SECRETS.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)


def redact(text: str) -> str:
    """`text` with every registered secret, and the value of every `key` query parameter, replaced by
    `[redacted]`."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return redact_query_keys(text)


def redact_query_keys(text: str) -> str:
    """`text` with the value of every `key` query parameter (`?key=…`, `&key=…`) replaced by `[redacted]`."""
    return _QUERY_KEY.sub(lambda m: m.group(1) + REDACTED, text)
