"""Why the gateway refuses a turn before it starts, as domain errors without HTTP statuses.

The gateway core raises these; the HTTP layer alone maps them to statuses and bodies (`app.api.error_responses`), and
each door phrases them in its own error shape.
"""

from __future__ import annotations

from app.contract.limit_kinds import LimitKind, StreamCap


class Refusal(Exception):
    """A turn the gateway will not start. `param` names the request field at fault, when there is one."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class NotAuthenticated(Refusal):
    """Client keys are configured and the request presents none, or one that is not among them."""


class UnknownModel(Refusal):
    """The model (or a fallback) names no configured provider/model."""


class AmbiguousModel(Refusal):
    """A bare model id that several configured providers list; the message names them."""


class AtCapacity(Refusal):
    """A replica's concurrency setting is reached (`limit`: which one)."""

    def __init__(self, message: str, limit: StreamCap) -> None:
        super().__init__(message)
        self.limit = limit


class Draining(Refusal):
    """The gateway is shutting down and takes no new turns."""


class RequestRejected(Refusal):
    """The request asks for something the serving vendor cannot honour (raised by `Provider.check_request`)."""


class TokensNotCounted(Refusal):
    """The serving api has no token counting endpoint (raised by `Provider.count_tokens`): the gateway never
    answers a count with a number of its own."""


class LimitExceeded(Refusal):
    """A per-key limit of the keys file is reached (`kind`: which one, as the client sees it); `retry_after`
    is whole seconds until it may succeed."""

    def __init__(self, message: str, kind: LimitKind, retry_after: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = max(1, retry_after)


class ModelNotAllowed(Refusal):
    """The key's policy does not allow this model (or fallback)."""


class UnpricedModel(Refusal):
    """A key with a budget asks for a model the catalog has no price for: its turns would spend 0 and never
    reach the budget. `model` is the `<provider>/<model id>` that would serve it."""

    def __init__(self, message: str, model: str, param: str | None = None) -> None:
        super().__init__(message, param)
        self.model = model


class LimitsUnavailable(Refusal):
    """The shared limit store did not answer and the gateway is set to fail closed."""


class EventsLost(Refusal):
    """A resumption asks for events the gateway no longer has (trimmed by the cap, expired, or lost with a
    Redis restart): never answered with a gap."""


class EventStoreUnavailable(Refusal):
    """The shared event store (Redis) did not answer a resumption in time."""
