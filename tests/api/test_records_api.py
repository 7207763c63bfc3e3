"""`GET /v1/requests/{id}` and `GET /v1/requests?limit=N` (CONTRACT §1, §5), on both stores."""

from __future__ import annotations

import pytest

from tests.conftest import marker, turn

ALICE = {"Authorization": "Bearer key-a-SECRET"}
BOB = {"Authorization": "Bearer key-b-SECRET"}
KEYS = "alice:key-a-SECRET,bob:key-b-SECRET"


def _finished(gw, model: str = "anthropic/text", headers: dict | None = None) -> str:
    result = gw.stream(turn(model, marker()), headers=headers or {})
    assert result.status == 200
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    return request_id


def test_x_request_id_is_the_record_id(ledger_gateway):
    gw = ledger_gateway()
    request_id = _finished(gw)
    response = gw.http.get(f"/v1/requests/{request_id}")
    assert response.status_code == 200 and response.json()["requestId"] == request_id
    assert response.headers["x-request-id"] != request_id  # the lookup is a request of its own
    # /v1/complete too: its X-Request-Id names its record.
    complete = gw.http.post("/v1/complete", json=turn("anthropic/text"))
    assert complete.status_code == 200
    gw.job(complete.headers["x-request-id"])
    record = gw.http.get(f"/v1/requests/{complete.headers['x-request-id']}").json()
    assert record["outcome"] == "done" and record["message"] == complete.json()


def test_unknown_record_is_404_with_error_body(ledger_gateway):
    gw = ledger_gateway()
    response = gw.http.get("/v1/requests/req_000000000000nothinghere00")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "not_found" and error["param"] == "requestId" and error["message"]


def test_list_is_newest_first_with_a_limit(ledger_gateway):
    gw = ledger_gateway()
    ids = [_finished(gw) for _ in range(3)]
    records = gw.http.get("/v1/requests").json()["records"]
    assert [r["requestId"] for r in records] == ids[::-1]
    two = gw.http.get("/v1/requests", params={"limit": 2}).json()["records"]
    assert [r["requestId"] for r in two] == ids[:0:-1]


def test_list_defaults_to_20(ledger_gateway):
    gw = ledger_gateway()
    ids = [_finished(gw) for _ in range(21)]
    records = gw.http.get("/v1/requests").json()["records"]
    assert [r["requestId"] for r in records] == ids[:0:-1]


@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten", "1.5"])
def test_bad_limit_is_422(gateway, limit):
    response = gateway.http.get("/v1/requests", params={"limit": limit})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "validation_error" and "limit" in error["param"]


def test_key_cannot_read_or_list_another_keys_records(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS)
    alice_id = _finished(gw, headers=ALICE)
    bob_id = _finished(gw, headers=BOB)

    own = gw.http.get(f"/v1/requests/{alice_id}", headers=ALICE)
    assert own.status_code == 200 and own.json()["apiKeyId"] == "alice"
    other = gw.http.get(f"/v1/requests/{bob_id}", headers=ALICE)
    missing = gw.http.get("/v1/requests/req_000000000000nothinghere00", headers=ALICE)
    assert other.status_code == missing.status_code == 404
    assert other.json() == missing.json()  # another key's record looks exactly like a missing one

    assert [r["requestId"] for r in gw.http.get("/v1/requests", headers=ALICE).json()["records"]] == [alice_id]
    assert [r["requestId"] for r in gw.http.get("/v1/requests", headers=BOB).json()["records"]] == [bob_id]
    assert gw.http.get(f"/v1/requests/{alice_id}", headers=BOB).status_code == 404


def test_auth_off_records_have_no_key_and_are_visible_to_all(ledger_gateway):
    gw = ledger_gateway()
    request_id = _finished(gw)
    record = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": "Bearer anything"}).json()
    assert record["apiKeyId"] is None
    assert request_id in [r["requestId"] for r in gw.http.get("/v1/requests").json()["records"]]


def test_store_failure_is_503_not_500(ledger_gateway):
    gw = ledger_gateway()
    request_id = _finished(gw)
    gw.server.call(gw.state.ledger.aclose())
    response = gw.http.get(f"/v1/requests/{request_id}")
    assert response.status_code == 503 and response.json()["error"]["type"] == "store_unavailable"
    assert gw.http.get("/v1/requests").status_code == 503
