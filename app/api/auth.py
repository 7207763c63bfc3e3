"""Client keys: `Authorization: Bearer <key>` checked against `GATEWAY_API_KEYS` in constant time.

A key's public identity (`apiKeyId` in records, logs and metrics) is its configured name, or for a bare
key `key-` and the first 12 hex digits of its SHA-256. The key itself is never stored or logged.
"""

from __future__ import annotations

import hashlib
import hmac

from app.api.errors import ApiError

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class KeyRing:
    def __init__(self, spec: str) -> None:
        self._keys: list[tuple[str, bytes]] = []
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            name, sep, key = item.partition(":")
            if not sep:
                name, key = "", item
            if not name:
                name = "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]
            self._keys.append((name, hashlib.sha256(key.encode()).digest()))

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def identify(self, authorization: str | None) -> str | None:
        """The key id for an Authorization header; None when auth is off. Raises ApiError(401) otherwise."""
        if not self._keys:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "authentication_error", "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        # Compare digests of equal length against every key, without stopping early.
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: str | None = None
        for name, key_digest in self._keys:
            if hmac.compare_digest(digest, key_digest):
                found = name
        if found is None:
            raise ApiError(401, "authentication_error", "invalid API key", headers={"WWW-Authenticate": "Bearer"})
        return found
