"""`http_error_kind`: a vendor's 429 or 5xx whose body blames the request itself (OpenAI's "Request too large",
Anthropic's `request_too_large`, an `invalid_request_error` under a 5xx) is `request_at_fault`, which a pool
does not cool a deployment for; a plain rate limit or server error stays `http`."""

from __future__ import annotations

import pytest

from app.contract.failures import ErrorKind
from app.providers.base import http_error_kind

OPENAI_TOO_LARGE = {
    "error": {
        "message": "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, "
        "Requested 51233. The input or output tokens must be reduced in order to run successfully.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OPENAI_RATE_LIMIT = {
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, "
        "Used 29000, Requested 1500. Please try again in 1.2s.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def anthropic(kind: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": "..."}}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, OPENAI_TOO_LARGE),
        (429, '{"error": {"message": "Request too large for gpt-4o", "type": "tokens"}}'),  # the raw text
        (413, anthropic("request_too_large")),
        (429, anthropic("request_too_large")),
        (500, anthropic("invalid_request_error")),
        (500, {"error": {"message": "bad input", "type": "invalid_request_error", "code": None}}),
    ],
)
def test_a_failure_about_the_request_itself_is_request_at_fault(status, body):
    expected = ErrorKind.HTTP if status == 413 else ErrorKind.REQUEST_AT_FAULT  # a 413 never cools anyway
    assert http_error_kind(status, body) is expected


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, OPENAI_RATE_LIMIT),
        (429, anthropic("rate_limit_error")),
        (529, anthropic("overloaded_error")),
        (500, anthropic("api_error")),
        (503, "<html><title>503 Service Unavailable</title></html>"),
        (400, anthropic("invalid_request_error")),  # a plain bad request: `http`, as before
    ],
)
def test_a_rate_limit_or_server_error_stays_http(status, body):
    assert http_error_kind(status, body) is ErrorKind.HTTP
