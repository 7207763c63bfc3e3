"""The kinds of refusal admission answers, as enums whose values are the strings records, metrics
(`gateway_rejected_requests_total{kind=…}`) and error bodies (`error.type`) show."""

from __future__ import annotations

from enum import StrEnum


class LimitKind(StrEnum):
    """A per-key limit of the keys file that a store refused (`LimitExceeded.kind`, the 429's `error.type`)."""

    RATE_LIMIT_RPM = "rate_limit_rpm"
    RATE_LIMIT_TPM = "rate_limit_tpm"
    CONCURRENCY_LIMIT = "concurrency_limit"
    BUDGET_EXCEEDED = "budget_exceeded"
    # Only between a store and `Limits`: the rest of the budget is reserved by turns in flight (answered as
    # `budget_exceeded`, with a short Retry-After).
    BUDGET_IN_FLIGHT = "budget_in_flight"

    @property
    def per_minute(self) -> bool:
        """Whether the wait is at most one 60-second window."""
        return self in (LimitKind.RATE_LIMIT_RPM, LimitKind.RATE_LIMIT_TPM)

    @property
    def answered_as(self) -> LimitKind:
        """The kind a client and the metrics see."""
        return LimitKind.BUDGET_EXCEEDED if self is LimitKind.BUDGET_IN_FLIGHT else self


class StreamCap(StrEnum):
    """A replica's concurrency setting that refused a stream (`AtCapacity.limit`): `GATEWAY_MAX_STREAMS`, or
    `GATEWAY_MAX_STREAMS_PER_KEY` for a key without `concurrent_streams` of its own."""

    MAX_STREAMS = "max_streams"
    MAX_STREAMS_PER_KEY = "max_streams_per_key"


class Rejection(StrEnum):
    """The other reasons admission refuses a turn (the metrics' kinds besides `LimitKind` and `StreamCap`)."""

    DRAINING = "draining"
    MODEL_NOT_ALLOWED = "model_not_allowed"
    MODEL_NOT_PRICED = "model_not_priced"
    LIMITS_UNAVAILABLE = "limits_unavailable"
