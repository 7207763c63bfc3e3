"""Token counts (`POST /v1/messages/count_tokens`): the serving vendor's own count of a request's input tokens.

A count is not a turn: it resolves the model the request names (a route counts on its first entry: the model
a turn would try first), checks the key's allowed models, and asks that provider's adapter once
(`Provider.count_tokens`), within the first-event timeout. No dispatcher, no retry or fallback (another
model's count would answer a different question), no request record, no rate, token or spend accounting
(vendors do not bill counts). Where the serving api has no counting endpoint the adapter raises
`TokensNotCounted`: the gateway never answers with an estimate of its own (an agent that compacts its context
by the count would act on a wrong number).
"""

from __future__ import annotations

import asyncio
from app.contract.failures import ErrorKind
from app.contract.refusals import Refusal
from app.contract.request import StreamRequest
from app.core.job import Route
from app.providers.base import ProviderError


async def count_tokens(route: Route, request: StreamRequest, timeout: float) -> int:
    """The vendor's count for `request` on `route` (the first entry of the plan its model names: the gateway
    resolves it and checks the key's allowed models first, `Gateway.count_tokens`). Raises a `Refusal`
    (`TokensNotCounted`) before any call, and `ProviderError` (its message prefixed with `<provider>/<model>`,
    like a turn's) when the vendor fails or does not answer within `timeout` seconds."""
    provider = route.provider
    try:
        async with asyncio.timeout(timeout):
            return await provider.count_tokens(route.model, request.context, request.options)
    except Refusal:
        raise
    except TimeoutError:
        raise ProviderError(f"{route.label} token count timed out after {timeout:g}s", kind=ErrorKind.TIMEOUT) from None
    except Exception as exc:
        error = exc if isinstance(exc, ProviderError) else provider.error(exc)
        if error is None:
            raise
        raise ProviderError(
            f"{route.label} {error.message}",
            status=error.status,
            retry_after_ms=error.retry_after_ms,
            kind=error.kind,
        ) from None
