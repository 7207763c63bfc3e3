"""Structured logs: one JSON line per settled request, no keys, content only when asked for."""

from __future__ import annotations

import io
import json
import logging

import pytest

from app.telemetry.logs import REQUEST_LOGGER, JsonFormatter
from tests.conftest import PROVIDER_KEYS, marker, turn

CLIENT_KEY = "sk-client-logs-0001"


def _request_line(gw, caplog, body) -> dict:
    with caplog.at_level(logging.INFO, logger=REQUEST_LOGGER):
        result = gw.stream(body, headers={"Authorization": f"Bearer {CLIENT_KEY}"})
        request_id = result.headers["x-request-id"]
        gw.job(request_id)
    records = [r for r in caplog.records if r.name == REQUEST_LOGGER and getattr(r, "requestId", None) == request_id]
    assert len(records) == 1
    line = JsonFormatter().format(records[0])
    for key in (*PROVIDER_KEYS.values(), CLIENT_KEY):
        assert key not in line
    return json.loads(line)


@pytest.fixture(scope="module")
def plain(gateway_factory):
    return gateway_factory(api_keys=f"logs:{CLIENT_KEY}")


def test_settled_request_line(plain, caplog):
    m = marker()
    entry = _request_line(plain, caplog, turn("anthropic/text", f"secret prompt {m}"))
    assert entry["logger"] == REQUEST_LOGGER and entry["level"] == "info"
    assert entry["apiKeyId"] == "logs" and entry["provider"] == "anthropic" and entry["model"] == "text"
    assert entry["outcome"] == "done" and entry["stopReason"] == "stop" and entry["attempts"] == 1
    assert entry["tokens"]["input"] == 25 and entry["cost"] > 0
    assert entry["ttftMs"] >= 0 and entry["durationMs"] >= entry["ttftMs"]
    assert entry["errorMessage"] is None and "errorKind" not in entry
    assert m not in json.dumps(entry)  # no message content by default


def test_error_line(plain, caplog):
    entry = _request_line(plain, caplog, turn("anthropic/http-401"))
    assert entry["level"] == "warning" and entry["outcome"] == "error"
    assert entry["errorMessage"].startswith("anthropic/http-401 returned HTTP 401")
    assert entry["errorKind"] == "http" and entry["interrupt"] is None  # typed, not parsed from the message


def test_content_only_when_enabled(gateway_factory, caplog):
    gw = gateway_factory(api_keys=f"logs:{CLIENT_KEY}", log_content=True)
    m = marker()
    entry = _request_line(gw, caplog, turn("anthropic/text", f"prompt {m}"))
    assert m in entry["content"][0]["text"]
    assert entry["context"]["messages"][0]["content"] == f"prompt {m}"


def test_formatter_redacts_keys_that_slip_into_messages(plain):
    record = logging.LogRecord(
        "gateway", logging.ERROR, __file__, 1, "upstream said %s", (PROVIDER_KEYS["anthropic"],), None
    )
    line = JsonFormatter().format(record)
    assert PROVIDER_KEYS["anthropic"] not in line and "[redacted]" in line


def test_a_provider_error_never_carries_a_registered_key():
    from app.providers.base import ProviderError
    from app.redaction import register_secrets

    register_secrets("sk-echoed-back-0123456789", "short")
    error = ProviderError(
        'returned HTTP 401: invalid credentials: {"authorization": "Bearer sk-echoed-back-0123456789"} short'
    )
    assert "sk-echoed-back-0123456789" not in error.message and "[redacted]" in error.message
    assert str(error) == error.message and error.message.endswith(" short")  # too short to be a key: kept


def test_the_access_log_blanks_every_key_query_parameter_known_or_not(gateway_factory):
    """A Gemini client's `?key=` never reaches the access log (issue 39 item 4): not a key the gateway knows,
    not a wrong one, not one whose parameter name is percent-encoded (which Starlette reads as `key` too).
    uvicorn's access lines go through the gateway's formatter, as `python -m app` configures them."""
    known, wrong, encoded = "sk-client-known-0123456789", "sk-wrong-unknown-0123456789", "sk-wrong-encoded-0123456789"
    gw = gateway_factory(api_keys=f"gemini:{known}")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    access = logging.getLogger("uvicorn.access")
    level = access.level
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        path = "/v1beta/models/anthropic/text:generateContent"
        body = {"contents": [{"parts": [{"text": marker()}]}]}
        assert gw.http.post(path, json=body, params={"key": known}).status_code == 200
        assert gw.http.post(path, json=body, params={"key": wrong}).status_code == 401
        assert gw.http.post(f"{path}?alt=sse&%6Bey={encoded}", json=body).status_code == 401
    finally:
        access.removeHandler(handler)
        access.setLevel(level)
    lines = [json.loads(line)["msg"] for line in stream.getvalue().splitlines()]
    assert len([line for line in lines if "generateContent" in line]) == 3, lines
    for key in (known, wrong, encoded):
        assert not [line for line in lines if key in line]
    assert [line.count("ey=[redacted]") for line in lines if "generateContent" in line] == [1, 1, 1]


def test_text_lines_for_a_terminal_carry_the_same_fields_without_secrets():
    from app.redaction import register_secrets
    from app.telemetry.logs import TextFormatter

    register_secrets("sk-text-format-secret-0123")
    record = logging.LogRecord(
        "gateway.providers", logging.INFO, "", 0, "key %s", ("sk-text-format-secret-0123",), None
    )
    record.provider = "anthropic"
    record.simulator = True
    line = TextFormatter().format(record)
    assert "\n" not in line and not line.startswith("{")
    assert "info" in line and "gateway.providers: key " in line and "provider=anthropic simulator=True" in line
    assert "sk-text-format-secret-0123" not in line


def test_the_log_format_is_text_on_a_terminal_json_elsewhere_unless_set(monkeypatch):
    import io

    from app.settings import Settings
    from app.telemetry.logs import log_format, logging_config

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    assert log_format() == "text" and log_format("json") == "json"
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert log_format() == "json" and log_format("text") == "text"
    formatter = logging_config("info", "text")["formatters"]["lines"]["()"]
    assert formatter == "app.telemetry.logs.TextFormatter"
    assert Settings(log_format=" Text ").log_format == "text"
    with pytest.raises(ValueError, match="not a log format"):
        Settings(log_format="yaml")
