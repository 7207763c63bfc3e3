"""Client keys: the bearer key a request presents (read at the edge, `app.api.auth`) checked against
`GATEWAY_API_KEYS` (and the keys file's digests) in constant time.

A key's public identity (`apiKeyId` in records, logs and metrics) is its configured name, or for a bare
key `key-` and the first 12 hex digits of its SHA-256. The key itself is never stored or logged.

`parse_keys` is the one reader of a key spec: auth and log redaction both use what it returns, so they
agree on where a key starts (after the first `:`; the key itself may contain `:`).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.contract.refusals import NotAuthenticated


@dataclass(frozen=True)
class ClientKey:
    """One configured client key: its public id and the secret a client sends as its bearer token."""

    name: str
    secret: str = field(repr=False)


def key_id(secret: str) -> str:
    """The public id of a key configured without a name."""
    return "key-" + hashlib.sha256(secret.encode()).hexdigest()[:12]


class KeysConfigError(ValueError):
    """Client keys that cannot be served as configured (`GATEWAY_API_KEYS`, the keys file): `what` is wrong
    and how to `fix` it, one line that never contains a key."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix


def parse_keys(spec: str) -> list[ClientKey]:
    """`name:key` or `key` items separated by commas. The name ends at the FIRST `:`; everything after it is
    the key (which may itself contain `:`). An empty name (`:key`) or no name gets `key_id(key)`. An item with
    nothing after its `:` (`team:`, typically an unset variable in `name:$KEY`) raises `KeysConfigError`: it
    would otherwise leave the ring empty, and an empty ring turns auth off."""
    keys: list[ClientKey] = []
    for index, item in enumerate(part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, secret = item.partition(":")
        if not sep:
            name, secret = "", item
        secret = secret.strip()
        if not secret:
            raise KeysConfigError(
                f"GATEWAY_API_KEYS item {index + 1} ({name.strip()!r}) has no key after its ':'",
                "give every item a key (`name:key` or `key`), or leave GATEWAY_API_KEYS empty to turn auth off",
            )
        keys.append(ClientKey(name.strip() or key_id(secret), secret))
    return keys


class KeyRing:
    """The keys that may call, by name and SHA-256 digest; `identify` names the caller of a request."""

    def __init__(
        self,
        keys: Iterable[ClientKey],
        digests: Iterable[tuple[str, bytes]] = (),
        expiring: Iterable[tuple[str, bytes, float]] = (),
        *,
        required: bool = False,
    ) -> None:
        """`keys`: from `GATEWAY_API_KEYS`; `digests`: more keys as (name, SHA-256 digest), e.g. the keys file;
        `expiring`: keys valid until a wall-clock time (name, digest, epoch seconds; `math.inf`: no end), the
        managed keys (`app.admin`). `required`: auth stays on even while no key is configured (an operator
        who set `GATEWAY_ADMIN_KEYS` hands out managed keys; the gateway is not open meanwhile)."""
        self._keys: list[tuple[str, bytes, float]] = [
            (key.name, hashlib.sha256(key.secret.encode()).digest(), math.inf) for key in keys
        ]
        self._keys.extend((name, digest, math.inf) for name, digest in digests)
        self._keys.extend(expiring)
        self._required = required

    @property
    def enabled(self) -> bool:
        return bool(self._keys) or self._required

    def identify(self, authorization: str | None) -> str | None:
        """The key id for an Authorization header value; None when auth is off. Raises NotAuthenticated for a
        missing or unknown key (the edge answers 401)."""
        if not self.enabled:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("missing bearer token")
        # Compare digests of equal length against every key, without stopping early.
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: str | None = None
        now = time.time()
        for name, key_digest, until in self._keys:
            if hmac.compare_digest(digest, key_digest) and now < until:
                found = name
        if found is None:
            raise NotAuthenticated("invalid API key")
        return found
