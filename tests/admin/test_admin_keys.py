"""The admin API for keys (CONTRACT §11), on SQLite and PostgreSQL: a managed key is created with its secret
answered once and stored only as a digest, authenticates client requests with its policy, is listed beside the
env and file keys (read-only, marked by source), changed, rotated with an overlap, revoked; admin keys and client
keys never stand in for each other; every change is in the audit log without a secret."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

from tests.conftest import turn

ADMIN = {"Authorization": "Bearer adm-SECRET"}
ENV_KEYS = "envkey:env-SECRET"


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _complete(gw, secret: str, model: str = "anthropic/text"):
    return gw.http.post("/v1/complete", json=turn(model), headers=bearer(secret))


def _admin_gateway(ledger_gateway, tmp_path: Path):
    keys_file = tmp_path / "keys.json"
    digest = hashlib.sha256(b"file-SECRET").hexdigest()
    keys_file.write_text(json.dumps({"keys": [{"name": "filekey", "sha256": digest, "requests_per_minute": 5}]}))
    return ledger_gateway(
        api_keys=ENV_KEYS, admin_keys="root:adm-SECRET", keys_file=str(keys_file), admin_sync_interval=0.1
    )


def test_managed_key_lifecycle(ledger_gateway, ledger_url, tmp_path):
    gw = _admin_gateway(ledger_gateway, tmp_path)
    created = gw.http.post(
        "/v1/admin/keys",
        json={"name": "dev-ann", "models": ["anthropic/*"], "tags": ["ci"], "metadata": {"owner": "ann"}},
        headers=ADMIN,
    )
    assert created.status_code == 201, created.text
    secret = created.json()["secret"]
    assert created.json()["source"] == "managed" and created.json()["tags"] == ["ci"]

    assert _complete(gw, secret).status_code == 200
    assert _complete(gw, secret, "openai/text").status_code == 403  # its allowed models hold

    listed = gw.http.get("/v1/admin/keys", headers=ADMIN).json()["keys"]
    assert {(k["name"], k["source"]) for k in listed} == {
        ("envkey", "env"),
        ("filekey", "file"),
        ("dev-ann", "managed"),
    }
    assert secret not in json.dumps(listed)
    assert gw.http.patch("/v1/admin/keys/filekey", json={"tags": ["x"]}, headers=ADMIN).status_code == 409
    assert gw.http.post("/v1/admin/keys", json={"name": "envkey"}, headers=ADMIN).status_code == 409
    assert gw.http.post("/v1/admin/keys", json={"name": "dev-ann"}, headers=ADMIN).status_code == 409

    patched = gw.http.patch("/v1/admin/keys/dev-ann", json={"models": []}, headers=ADMIN)
    assert patched.status_code == 200 and patched.json()["models"] == []
    assert _complete(gw, secret, "openai/text").status_code == 200

    rotated = gw.http.post("/v1/admin/keys/dev-ann/rotate", json={"overlapSeconds": 60}, headers=ADMIN)
    assert rotated.status_code == 200
    new_secret = rotated.json()["secret"]
    assert new_secret != secret and "previousSecretValidUntil" in rotated.json()
    assert _complete(gw, secret).status_code == 200  # the old secret within its overlap
    assert _complete(gw, new_secret).status_code == 200
    assert gw.http.post("/v1/admin/keys/dev-ann/rotate", headers=ADMIN).status_code == 200  # no overlap
    assert _complete(gw, new_secret).status_code == 401

    assert gw.http.delete("/v1/admin/keys/dev-ann", headers=ADMIN).status_code == 200
    assert gw.http.get("/v1/admin/keys/dev-ann", headers=ADMIN).status_code == 404

    audit = gw.http.get("/v1/admin/audit", headers=ADMIN).json()["entries"]
    assert [e["action"] for e in audit] == ["key.revoke", "key.rotate", "key.rotate", "key.update", "key.create"]
    assert all(e["actor"] == "root" for e in audit)
    assert audit[3]["before"]["models"] == ["anthropic/*"] and audit[3]["after"]["models"] == []
    for leaked in (secret, new_secret, hashlib.sha256(secret.encode()).hexdigest()):
        assert leaked not in json.dumps(audit)
    if ledger_url.startswith("sqlite"):  # no secret anywhere in the database file
        path = ledger_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:
            dump = "\n".join(db.iterdump())
        assert secret not in dump and new_secret not in dump


def test_expired_managed_key_is_refused(ledger_gateway, tmp_path):
    gw = _admin_gateway(ledger_gateway, tmp_path)
    past = int(time.time() * 1000) - 1000
    secret = gw.http.post("/v1/admin/keys", json={"name": "old", "expiresAt": past}, headers=ADMIN).json()["secret"]
    assert _complete(gw, secret).status_code == 401
    assert gw.http.patch("/v1/admin/keys/old", json={"expiresAt": None}, headers=ADMIN).status_code == 200
    assert _complete(gw, secret).status_code == 200


def test_admin_and_client_keys_never_stand_in_for_each_other(ledger_gateway, tmp_path):
    gw = _admin_gateway(ledger_gateway, tmp_path)
    assert gw.http.get("/v1/admin/keys", headers=bearer("env-SECRET")).status_code == 401
    assert gw.http.get("/v1/admin/keys").status_code == 401
    assert _complete(gw, "adm-SECRET").status_code == 401
    error = gw.http.post("/v1/admin/keys", json={"name": "a", "bogus": 1}, headers=ADMIN)
    assert error.status_code == 422 and "error" in error.json()


def test_admin_api_is_off_without_admin_keys(ledger_gateway):
    gw = ledger_gateway()
    response = gw.http.get("/v1/admin/keys", headers=ADMIN)
    assert response.status_code == 404 and response.json()["error"]["type"] == "admin_off"


def test_admin_keys_as_digests_and_auth_on_without_client_keys(ledger_gateway):
    digest = hashlib.sha256(b"adm-SECRET").hexdigest()
    gw = ledger_gateway(admin_keys=f"ops:sha256:{digest}")
    assert _complete(gw, "anything").status_code == 401  # admin keys set: no open gateway meanwhile
    assert gw.http.post("/v1/admin/keys", json={"name": "k"}, headers=ADMIN).status_code == 201
