"""Client keys (CONTRACT §1, §7): 401 without a valid key, open operations endpoints, and no key anywhere
it could leak (stored records, log lines, responses)."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.conftest import PROVIDER_KEYS, marker, turn
from tests.ledger.test_ledger import raw_rows

CLIENT_KEYS = {"alice": "key-a-SECRET", "bob": "key-b-SECRET"}
KEYS = ",".join(f"{name}:{key}" for name, key in CLIENT_KEYS.items())
ALICE = {"Authorization": f"Bearer {CLIENT_KEYS['alice']}"}
BAD_HEADERS = [
    {},
    {"Authorization": "Bearer key-c-WRONG"},
    {"Authorization": f"Basic {CLIENT_KEYS['alice']}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {CLIENT_KEYS['alice']}x"},
]


@pytest.fixture(scope="module")
def keyed(gateway_factory):
    return gateway_factory(api_keys=KEYS)


def _calls(gw) -> list[tuple[str, str, dict | None]]:
    return [
        ("POST", "/v1/stream", turn("anthropic/text")),
        ("POST", "/v1/complete", turn("anthropic/text")),
        ("POST", "/api/stream", {"model": {"provider": "anthropic", "id": "text"}, "context": {"messages": []}}),
        ("GET", "/v1/requests", None),
        ("GET", "/v1/requests/req_000000000000nothinghere00", None),
        ("GET", "/v1/models", None),
    ]


@pytest.mark.parametrize("headers", BAD_HEADERS, ids=["none", "wrong", "basic", "empty", "suffix"])
def test_401_without_a_valid_key(keyed, headers):
    m = marker()
    for method, path, given in _calls(keyed):
        body = turn("anthropic/text", m) if given is not None and path != "/api/stream" else given
        response = keyed.http.request(method, path, json=body, headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.headers["x-request-id"].startswith("req_")
        error = response.json()["error"]
        if path == "/api/stream":
            assert isinstance(error, str) and error  # pi's client reads a string
        else:
            assert error["type"] == "authentication_error" and error["message"]
        for key in CLIENT_KEYS.values():
            assert key not in response.text
    assert keyed.sim.seen(m) == []  # nothing unauthorized reached a provider


def test_valid_key_is_accepted(keyed):
    result = keyed.stream(turn("anthropic/text"), headers=ALICE)
    assert result.status == 200 and result.terminal["type"] == "done"
    keyed.job(result.headers["x-request-id"])
    assert keyed.http.get("/v1/requests", headers=ALICE).status_code == 200
    assert keyed.http.get("/v1/models", headers=ALICE).status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_operations_endpoints_are_open(keyed, path):
    response = keyed.http.get(path)
    if path == "/metrics" and response.status_code == 404:
        pytest.skip("no /metrics route in this build")
    assert response.status_code == 200, response.text


def test_no_key_in_stored_rows_or_logs(ledger_gateway, ledger_url, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    gw = ledger_gateway(api_keys=KEYS)
    ids = []
    for model in ("anthropic/text", "anthropic/http-401", "anthropic/error-mid-stream", "anthropic/reset"):
        result = gw.stream(turn(model, marker()), headers=ALICE)
        ids.append(result.headers["x-request-id"])
    complete = gw.http.post("/v1/complete", json=turn("anthropic/http-500"), headers=ALICE)
    ids.append(complete.headers["x-request-id"])
    with httpx.Client(base_url=gw.url, timeout=30) as client:  # an aborted one
        with client.stream(
            "POST", "/v1/stream", json=turn("anthropic/slow;n=500;delay_ms=20"), headers=ALICE
        ) as response:
            ids.append(response.headers["x-request-id"])
            next(line for line in response.iter_lines() if line.startswith("event: text_delta"))
    for headers in BAD_HEADERS:
        gw.http.post("/v1/stream", json=turn("anthropic/text"), headers=headers)
    for request_id in ids:
        gw.job(request_id)
    listed = gw.http.get("/v1/requests", headers=ALICE)
    assert {r["requestId"] for r in listed.json()["records"]} == set(ids)
    assert {r["apiKeyId"] for r in listed.json()["records"]} == {"alice"}

    rows = raw_rows(ledger_url)
    captured = capfd.readouterr()
    logs = caplog.text + "".join(repr(record.__dict__) for record in caplog.records) + captured.out + captured.err
    assert all(request_id in rows for request_id in ids)
    assert any(request_id in logs for request_id in ids)  # the request log lines were captured
    for secret in [*PROVIDER_KEYS.values(), *CLIENT_KEYS.values()]:
        assert secret not in rows, f"a stored record contains {secret[:6]}…"
        assert secret not in logs, f"a log line contains {secret[:6]}…"
        assert secret not in listed.text


COLON_KEY = "sk-colon:part2:part3-SECRET"


def test_key_spec_is_split_on_the_first_colon_only():
    from app.policy.keyring import ClientKey, parse_keys

    keys = parse_keys(f"named:{COLON_KEY}, bare-key-0001 ,,:unnamed-0002")
    assert keys[0] == ClientKey("named", COLON_KEY)
    assert keys[1].secret == "bare-key-0001" and keys[1].name.startswith("key-")
    assert keys[2].secret == "unnamed-0002" and keys[2].name.startswith("key-")
    assert len(keys) == 3 and COLON_KEY not in repr(keys)


def test_key_with_colons_authenticates_and_is_fully_blanked_in_logs(gateway_factory):
    from app.telemetry.logs import JsonFormatter

    gw = gateway_factory(api_keys=f"colon:{COLON_KEY}")
    result = gw.stream(turn("anthropic/text"), headers={"Authorization": f"Bearer {COLON_KEY}"})
    assert result.status == 200 and result.terminal["type"] == "done"
    assert gw.job(result.headers["x-request-id"]).request.api_key_id == "colon"
    record = logging.LogRecord("gateway", logging.ERROR, __file__, 1, "client sent %s", (COLON_KEY,), None)
    line = JsonFormatter().format(record)
    assert "[redacted]" in line
    for part in COLON_KEY.split(":"):
        assert part not in line, line
