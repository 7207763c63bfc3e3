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
        (httpx2.ReadError, aiohttp.ClientPayloadError("Response payload is not completed"), "connection lost: Response payload", "transport"),
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
