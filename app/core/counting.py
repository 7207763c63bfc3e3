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
from typing import TYPE_CHECKING

from app.contract.failures import ErrorKind
from app.contract.request import StreamRequest
from app.providers.base import ProviderError
from app.contract.refusals import Refusal

if TYPE_CHECKING:
    from app.gateway import Gateway


async def count_tokens(gateway: "Gateway", request: StreamRequest, key_id: str | None) -> int:
    """The vendor's count for `request` on the model it names. Raises a `Refusal` (unknown or disallowed
    model, `TokensNotCounted`) before any call, and `ProviderError` (its message prefixed with
    `<provider>/<model>`, like a turn's) when the vendor fails or does not answer in time."""
    dispatcher = gateway.dispatcher
    route = dispatcher.plan(request.model, [])[0]
    gateway.limits.check_models(key_id, [dispatcher.resolver.policy_name(request.model)])
    provider = route.provider
    timeout = gateway.settings.first_event_timeout
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
