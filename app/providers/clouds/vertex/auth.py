"""Google credentials for Vertex AI (CONTRACT §9a): Application Default Credentials through `google-auth`,
read and refreshed by the SDKs themselves (`anthropic`'s `AsyncAnthropicVertex`, `google-genai` with
`vertexai=True`): a service-account or workload-identity-federation file named by
`GOOGLE_APPLICATION_CREDENTIALS`, GKE workload identity, the metadata server. Both SDKs renew a token in a
worker thread before its request once it is within `google-auth`'s refresh margin of its expiry (3 min 45 s),
so no stream waits on a refresh and open streams keep the token they started with.

A chain that yields nothing, or a token endpoint that refuses the credentials, fails the attempt as a 401
with Google's reason (`invalid_grant: Invalid JWT Signature.`), never a token or a private key."""

from __future__ import annotations

from google.auth import exceptions as auth_errors

from app.providers.base import ProviderError, error_text


def credentials_error(exc: BaseException) -> ProviderError | None:
    """A ProviderError for a Google credentials failure (raised while the SDK prepares a request), else None."""
    if isinstance(exc, auth_errors.TransportError):  # the token endpoint could not be reached: may pass
        return ProviderError(f"could not reach Google's token endpoint: {_reason(exc)}", retryable=True, kind="connect")
    if isinstance(exc, auth_errors.RefreshError) and getattr(exc, "retryable", False):  # its 5xx or 429
        return ProviderError(f"Google's token endpoint failed: {_reason(exc)}", retryable=True, kind="upstream")
    if isinstance(exc, (auth_errors.RefreshError, auth_errors.DefaultCredentialsError)):
        return ProviderError(
            f"returned HTTP 401: Google credentials refused or missing: {_reason(exc)}", status=401, kind="http"
        )
    return None


def _reason(exc: BaseException) -> str:
    """The error's first argument only: google-auth puts the token endpoint's parsed answer after it."""
    first = exc.args[0] if exc.args else type(exc).__name__
    return error_text(str(first))[:300]
