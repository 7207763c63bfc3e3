"""How transport failures under the SDKs read as provider errors (`app/providers/transport.py`)."""

from __future__ import annotations

import aiohttp
import httpx2
import pytest

from app.providers.transport import transport_error


def _raised_as(wrapper: type[Exception], cause: BaseException) -> Exception:
    """An httpx2 error raised `from` an aiohttp one, as the SDKs' aiohttp transport does."""
    try:
        raise wrapper("mapped") from cause
    except Exception as exc:
        return exc


REFUSED = aiohttp.ClientConnectorError(
    aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 9, False, True, None, None, None, None),
    ConnectionRefusedError(111, "Connect call failed"),
)


@pytest.mark.parametrize(
    ("wrapper", "cause", "message", "kind"),
    [
        # The openai SDK's transport maps a refused connection to ConnectTimeout: the cause decides.
        (httpx2.ConnectTimeout, REFUSED, "connection failed: Cannot connect to host 127.0.0.1:9", "connect"),
        (httpx2.ConnectError, aiohttp.ConnectionTimeoutError(), "connect timeout", "connect_timeout"),
        (httpx2.ConnectError, aiohttp.ServerDisconnectedError(), "connection lost: Server disconnected", "transport"),
        (
            httpx2.ReadError,
            aiohttp.ClientPayloadError("Response payload is not completed"),
            "connection lost: Response payload",
            "transport",
        ),
        (httpx2.ReadTimeout, aiohttp.SocketTimeoutError(), "timed out: ReadTimeout", "timeout"),
    ],
)
def test_the_aiohttp_error_underneath_decides(wrapper, cause, message, kind):
    error = transport_error(_raised_as(wrapper, cause))
    assert error is not None and error.message.startswith(message) and error.kind == kind and error.retryable


def test_httpx2_errors_without_aiohttp_underneath():
    assert transport_error(httpx2.ConnectTimeout("slow")).kind == "connect_timeout"
    assert transport_error(httpx2.ReadError("reset")).message.startswith("connection lost")
    assert transport_error(ValueError("a bug of ours")) is None


# Hostile values in retry headers (issue 24 item 12): never an exception, at most a day.

from app.providers.base import RETRY_AFTER_MAX_MS, ProviderError, retry_after_ms, retry_delay_ms, wire_index, wire_text  # noqa: E402


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"retry-after": "inf"}, RETRY_AFTER_MAX_MS),
        ({"retry-after-ms": "1e400"}, RETRY_AFTER_MAX_MS),
        ({"retry-after": "1e300"}, RETRY_AFTER_MAX_MS),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "-inf"}, None),
        ({"x-ratelimit-reset-ms": "inf"}, RETRY_AFTER_MAX_MS),
        ({"retry-after": "2"}, 2000),
    ],
)
def test_retry_after_beyond_a_day_or_not_finite_is_capped_or_ignored(headers, expected):
    assert retry_after_ms(headers) == expected


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"retry-after-ms": "600", "retry-after": "1"}, 600),  # Azure's pair: the milliseconds, not the rounded second
        ({"retry-after-ms": "2500", "retry-after": "1"}, 2500),
        ({"retry-after": "3", "x-ratelimit-reset-ms": "200"}, 3000),
        ({"x-ratelimit-reset-ms": "250", "x-ratelimit-reset": "1"}, 250),
        ({"retry-after-ms": "nan", "retry-after": "1"}, 1000),  # an unusable header gives way to the next
    ],
)
def test_the_most_precise_retry_header_wins_not_the_largest(headers, expected):
    assert retry_after_ms(headers, now=0) == expected


def test_retry_delay_of_gemini_retry_info_is_capped():
    assert retry_delay_ms(float("9" * 400)) == RETRY_AFTER_MAX_MS and retry_delay_ms(37.5) == 37_500


@pytest.mark.parametrize("value", [5, [0], {"a": 1}, True])
def test_wire_text_refuses_what_is_not_text_as_malformed(value):
    assert wire_text(None, "x") == "" and wire_text("a", "x") == "a"
    with pytest.raises(ProviderError) as caught:
        wire_text(value, "a thinking block's thinking")
    assert caught.value.kind == "malformed" and caught.value.retryable
    assert caught.value.message.startswith("sent a thinking block's thinking that is not a string: ")


@pytest.mark.parametrize("value", [[0], {"i": 0}, "0", 1.0, True])
def test_wire_index_refuses_what_is_not_an_integer_as_malformed(value):
    assert wire_index(None, "x") is None and wire_index(3, "x") == 3
    with pytest.raises(ProviderError) as caught:
        wire_index(value, "a tool call index")
    assert caught.value.kind == "malformed" and "a tool call index that is not an integer" in caught.value.message


def test_the_gemini_adapter_reads_through_aiohttp_like_the_stainless_adapters():
    """The google-genai SDK gets an httpx2 client on aiohttp's transport (the one the Stainless adapters get from
    their SDK), its event bound over it: not httpcore2's pure-Python h11 parser, which cost more than half the
    Gemini adapter's CPU per event (docs/performance.md, "CPU per event")."""
    from openai import DefaultAioHttpClient
    from openai._vendor.httpx_aiohttp import AiohttpTransport

    from app.providers.config import ProviderConfig
    from app.providers.google import GoogleProvider

    provider = GoogleProvider(ProviderConfig(name="gemini", api_key="k", base_url="http://127.0.0.1:9/google"))
    client = provider._http
    assert isinstance(client, DefaultAioHttpClient)
    bounding = client._transport
    assert type(bounding).__name__ == "_BoundingTransport"
    assert isinstance(bounding._inner, AiohttpTransport)
