"""The secrets the gateway must never show (provider and client keys), and `redact`, which takes them out of text.

Keys are registered once where they are configured (`app.gateway`: the built-in providers' and the clients'
keys; `app.providers.registry`: every served catalog provider's key, `keyEnv` ones included). Two places
apply `redact`, so nothing the gateway emits or stores carries a key: `ProviderError` (every upstream failure
text enters the gateway there: error events, door error bodies, records and metrics read it from there) and the
log formatter (`app.telemetry.logs`), for anything else that reaches a log line.
"""

from __future__ import annotations

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words

_SECRETS: set[str] = set()


def register_secrets(*values: str | None) -> None:
    """Strings never to be shown (keys). Values shorter than `MIN_SECRET_LENGTH` are ignored."""
    _SECRETS.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)


def has_secrets() -> bool:
    return bool(_SECRETS)


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `[redacted]`."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
