"""The HTTP client every SDK is given, and how transport failures read as provider errors."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx2

from app.providers.base import ProviderError


@dataclass(frozen=True, slots=True)
class TransportSettings:
    connect_timeout: float = 10.0
    total_timeout: float = 600.0
    max_connections: int = 10_000


def http_client(settings: TransportSettings) -> httpx2.AsyncClient:
    """A pooled client sized for many concurrent streams. Read timeouts are left to the dispatcher's
    watchdog (first event, idle gap, total), so the SDK only bounds connecting and the whole call."""
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(settings.total_timeout, connect=settings.connect_timeout),
        limits=httpx2.Limits(max_connections=settings.max_connections, max_keepalive_connections=256),
        follow_redirects=False,
    )


def transport_error(exc: BaseException) -> ProviderError | None:
    """A ProviderError for a network, framing or decoding failure; None for anything else (our own bugs)."""
    if isinstance(exc, httpx2.ConnectTimeout):
        return ProviderError("connect timeout", retryable=True, kind="connect_timeout")
    if isinstance(exc, httpx2.ConnectError):
        return ProviderError(f"connection failed: {exc or type(exc).__name__}", retryable=True, kind="connect")
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderError(f"timed out: {type(exc).__name__}", retryable=True, kind="timeout")
    if isinstance(exc, (httpx2.TransportError, httpx2.StreamError)):
        return ProviderError(f"connection lost: {exc or type(exc).__name__}", retryable=True, kind="transport")
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return ProviderError(f"sent malformed data: {exc}", retryable=True, kind="malformed")
    return None
