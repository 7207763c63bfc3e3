"""Start-up as an operator sees it, on real `python -m app` processes: failures say in one readable line
what failed and how to fix it (naming the database URL without its password), never a traceback."""

from __future__ import annotations

import gc
import hashlib
import json
import socket

import pytest
from pydantic import ValidationError

from app.settings import Settings

from tests.conftest import PROVIDER_KEYS, REDIS_URL, require_redis
from tests.procs import GatewayProcess, free_port


def _failed_start(sim_url: str, database_url: str) -> tuple[int, list[dict], str]:
    proc = GatewayProcess(sim_url, database_url=database_url)
    code = proc.proc.wait(180)
    stderr = proc.proc.stderr.read().decode()
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]  # every line is one JSON object
    return code, lines, stderr


@pytest.mark.parametrize(
    "url, shown, fix",
    [
        pytest.param(
            "postgresql://gw:s3cret-pw@127.0.0.1:{port}/gw?password=s3cret-pw&search_path=x",
            "postgresql://gw@127.0.0.1:{port}/gw?search_path=x",
            "start PostgreSQL",
            id="postgres-down",
        ),
        pytest.param("mysql://gw:s3cret-pw@db.example/gw", "mysql://gw@db.example/gw", "sqlite:///", id="bad-scheme"),
        pytest.param(
            "sqlite:////proc/no-such-dir/gateway.db",
            "sqlite:////proc/no-such-dir/gateway.db",
            "writable",
            id="sqlite-unwritable",
        ),
    ],
)
def test_a_failed_start_says_what_and_how_to_fix_it_in_one_line(sim, url, shown, fix):
    port = free_port()
    code, lines, stderr = _failed_start(sim.url, url.format(port=port))
    assert code != 0
    assert "Traceback" not in stderr and "s3cret-pw" not in stderr
    errors = [line for line in lines if line["level"] == "error" and line["msg"].startswith("start-up failed: ")]
    assert len(errors) == 1, stderr
    message = errors[0]["msg"]
    assert "\n" not in message and "exc" not in errors[0]
    assert shown.format(port=port) in message and "GATEWAY_DATABASE_URL" in message
    assert fix in message


def _start_up_lines(sim_url: str, **env: str) -> tuple[list[dict], str]:
    """The log lines of a process that started (and was then stopped)."""
    proc = GatewayProcess(sim_url, GATEWAY_LOG_LEVEL="info", **env)
    try:
        proc.wait_ready()
    finally:
        proc.proc.terminate()
        proc.proc.wait(30)
    stderr = proc.proc.stderr.read().decode()
    return [json.loads(line) for line in stderr.splitlines() if line.strip()], stderr


def _provider_line(lines: list[dict], name: str) -> dict:
    found = [line for line in lines if line["logger"] == "gateway.providers" and line.get("provider") == name]
    assert len(found) == 1, [line["msg"] for line in lines]
    return found[0]


def test_start_up_says_which_providers_are_served_from_where(sim):
    lines, stderr = _start_up_lines(sim.url, OPENAI_API_KEY="", GEMINI_API_KEY="", GOOGLE_API_KEY="")
    anthropic = _provider_line(lines, "anthropic")
    assert anthropic["keyFrom"] == "ANTHROPIC_API_KEY"
    assert anthropic["baseUrl"] == f"{sim.url}/anthropic" and anthropic["baseUrlFrom"] == "GATEWAY_ANTHROPIC_BASE_URL"
    assert anthropic["simulator"] is False
    assert "ANTHROPIC_API_KEY" in anthropic["msg"] and "GATEWAY_ANTHROPIC_BASE_URL" in anthropic["msg"]
    unserved = [line for line in lines if line["logger"] == "gateway.providers" and "not configured" in line["msg"]]
    assert len(unserved) == 1 and "openai (set OPENAI_API_KEY)" in unserved[0]["msg"]
    assert not any("demo mode" in line["msg"] for line in lines)
    assert PROVIDER_KEYS["anthropic"] not in stderr


def test_demo_mode_says_so_and_that_the_simulator_serves_every_provider(sim):
    lines, stderr = _start_up_lines(sim.url, GATEWAY_DEMO="1", OPENAI_API_KEY="", GEMINI_API_KEY="", GOOGLE_API_KEY="")
    demo = [line for line in lines if "demo mode" in line["msg"]]
    assert demo and demo[0]["level"] == "warning" and "simulator" in demo[0]["msg"]
    for name in ("anthropic", "openai", "google", "compat"):
        line = _provider_line(lines, name)
        assert line["simulator"] is True and "simulator" in line["msg"], line
        assert line["baseUrlFrom"] == "demo mode"
    assert _provider_line(lines, "anthropic")["keyFrom"] == "ANTHROPIC_API_KEY"  # a key of its own, still simulated
    assert _provider_line(lines, "openai")["keyFrom"] == "demo mode"
    for secret in (PROVIDER_KEYS["anthropic"], "demo-openai-key", "demo-anthropic-key"):
        assert secret not in stderr


def test_a_bad_setting_is_named_in_one_line_without_its_value(sim):
    proc = GatewayProcess(sim.url, GATEWAY_MAX_STREAMS="plenty-s3cret", GATEWAY_DRAIN_TIMEOUT="-5")
    code = proc.proc.wait(180)
    stderr = proc.proc.stderr.read().decode()
    assert code == 3 and "Traceback" not in stderr and "plenty-s3cret" not in stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    message = lines[0]["msg"]
    assert lines[0]["level"] == "error" and "\n" not in message
    assert "GATEWAY_MAX_STREAMS" in message and "integer" in message
    assert "GATEWAY_DRAIN_TIMEOUT" in message and "greater than or equal to 0" in message


def test_the_collector_thresholds_are_set_once_serving(gateway_factory, monkeypatch):
    """`GATEWAY_GC_THRESHOLD` (a JSON list) reaches `gc.set_threshold` when the gateway starts serving."""
    monkeypatch.setenv("GATEWAY_GC_THRESHOLD", "[12345, 6, 7]")
    assert Settings().gc_threshold == (12_345, 6, 7)
    monkeypatch.setenv("GATEWAY_GC_THRESHOLD", "[-1, 6, 7]")
    with pytest.raises(ValidationError):
        Settings()
    before = gc.get_threshold()
    try:
        gateway_factory(gc_threshold=(12_345, 6, 7))
        assert gc.get_threshold() == (12_345, 6, 7)
    finally:
        gc.set_threshold(*before)


def _keys_file(tmp_path, *entries: tuple[str, str]) -> str:
    """A keys file of (name, bearer key) entries."""
    path = tmp_path / "keys.json"
    keys = [{"name": name, "sha256": hashlib.sha256(key.encode()).hexdigest()} for name, key in entries]
    path.write_text(json.dumps({"keys": keys}))
    return str(path)


@pytest.mark.parametrize(
    "api_keys, file_entries, named",
    [
        pytest.param("team:", None, "GATEWAY_API_KEYS item 1 ('team') has no key", id="item-without-a-key"),
        pytest.param(
            "ops:sk-ops-1,team: ", None, "GATEWAY_API_KEYS item 2 ('team') has no key", id="second-item-without-a-key"
        ),
        pytest.param(
            "alice:sk-alice-env", [("alice", "sk-alice-file")], "key name 'alice' is given twice", id="name-in-both"
        ),
        pytest.param(
            "bob:sk-shared-key",
            [("carol", "sk-shared-key")],
            "one key is named both 'bob' and 'carol'",
            id="one-key-two-names",
        ),
        pytest.param(
            "",
            [("dave", "sk-dave"), ("erin", "sk-dave")],
            "one key is named both 'dave' and 'erin'",
            id="one-key-two-names-in-the-file",
        ),
    ],
)
def test_key_names_that_would_merge_identities_or_turn_auth_off_stop_the_start_in_one_line(
    sim, tmp_path, api_keys, file_entries, named
):
    env = {"GATEWAY_API_KEYS": api_keys}
    if file_entries is not None:
        env["GATEWAY_KEYS_FILE"] = _keys_file(tmp_path, *file_entries)
    proc = GatewayProcess(sim.url, **env)
    code = proc.proc.wait(180)
    stderr = proc.proc.stderr.read().decode()
    assert code == 3 and "Traceback" not in stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line["level"] == "error" and line["msg"].startswith("start-up failed: ")]
    assert len(errors) == 1, stderr
    assert named in errors[0]["msg"] and "\n" not in errors[0]["msg"]
    assert "sk-" not in stderr  # no key, whatever the item


def _one_failure_line(proc: GatewayProcess) -> str:
    """The single `start-up failed: …` line of a process that stopped at start-up with exit status 3."""
    code = proc.proc.wait(180)
    stderr = proc.proc.stderr.read().decode()
    assert code == 3 and "Traceback" not in stderr, stderr
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line["level"] == "error" and line["msg"].startswith("start-up failed: ")]
    assert len(errors) == 1, stderr
    assert "\n" not in errors[0]["msg"]
    return errors[0]["msg"]


@pytest.mark.parametrize(
    "env, named",
    [
        pytest.param(
            {"GATEWAY_PORT": "83620"}, ["GATEWAY_PORT", "less than or equal to 65535"], id="port-out-of-range"
        ),
        pytest.param(
            {"GATEWAY_GC_THRESHOLD": "foo"}, ["GATEWAY_GC_THRESHOLD", "not JSON", "[20000, 20, 100]"], id="gc-not-json"
        ),
        pytest.param({"GATEWAY_BASE_URLS": "foo"}, ["GATEWAY_BASE_URLS", "not JSON"], id="base-urls-not-json"),
        pytest.param({"GATEWAY_LOG_LEVEL": "loud"}, ["GATEWAY_LOG_LEVEL", "debug, trace"], id="unknown-log-level"),
        pytest.param(
            {"GATEWAY_REDIS_URL": "localhost:6379"},
            ["GATEWAY_REDIS_URL", "not a Redis URL"],
            id="redis-url-without-scheme",
        ),
        pytest.param(
            {"GATEWAY_WORKERS": "2"},
            ["GATEWAY_WORKERS=2 needs GATEWAY_REDIS_URL", "N times each limit", "GATEWAY_WORKERS=1"],
            id="workers-without-redis",
        ),
        pytest.param(
            {"GATEWAY_API_KEY": "sk-typo-s3cret"},
            ["GATEWAY_API_KEY (did you mean GATEWAY_API_KEYS?) is not a setting", "GATEWAY_ALLOW_UNKNOWN_VARIABLES"],
            id="unknown-variable-api-key",
        ),
        pytest.param(
            {"GATEWAY_KEY_FILE": "/tmp/keys.json", "GATEWAY_THROTLE_MS": "10"},
            [
                "GATEWAY_KEY_FILE (did you mean GATEWAY_KEYS_FILE?)",
                "GATEWAY_THROTLE_MS (did you mean GATEWAY_THROTTLE_MS?)",
            ],
            id="unknown-variables-key-file-throttle",
        ),
    ],
)
def test_a_bad_setting_stops_the_start_in_one_line_naming_the_variable(sim, env, named):
    message = _one_failure_line(GatewayProcess(sim.url, **env))
    for text in named:
        assert text in message


def test_an_unknown_variable_never_shows_its_value_and_the_operator_may_allow_it(sim):
    message = _one_failure_line(GatewayProcess(sim.url, GATEWAY_API_KEY="sk-typo-s3cret"))
    assert "sk-typo-s3cret" not in message
    lines, _ = _start_up_lines(sim.url, GATEWAY_API_KEY="sk-typo-s3cret", GATEWAY_ALLOW_UNKNOWN_VARIABLES="true")
    assert any("accepts requests without a key" in line["msg"] for line in lines)


def test_reserved_client_and_catalog_variables_are_not_unknown():
    """The suite's `GATEWAY_TEST_*`, the examples' `GATEWAY_URL`/`GATEWAY_MODEL`, a catalog provider's
    `GATEWAY_<NAME>_BASE_URL` and `keyEnv` are known; a provider name that is not in the catalog is not."""
    from app.catalog import Catalog
    from app.server.startup_messages import unknown_variables_refused

    catalog = Catalog.load()
    catalog.add({"providers": [{"name": "azure-west", "api": "openai-completions", "keyEnv": "GATEWAY_WEST_KEY"}]})
    environ = {
        "GATEWAY_TEST_POSTGRES_URL": "x",
        "GATEWAY_TEST_ANYTHING_NEW": "x",
        "GATEWAY_URL": "x",
        "GATEWAY_MODEL": "x",
        "GATEWAY_VLLM_BASE_URL": "x",
        "GATEWAY_AZURE_WEST_BASE_URL": "x",
        "GATEWAY_WEST_KEY": "x",
        "gateway_demo": "1",
        "GATEWAY_DEMO_AZURE_OPENAI_KEY": "x",  # set by demo mode in its own process, inherited by what it starts
    }
    assert unknown_variables_refused(environ, catalog.providers) is None
    refused = unknown_variables_refused({**environ, "GATEWAY_VLMM_BASE_URL": "x"}, catalog.providers)
    assert refused is not None and "GATEWAY_VLMM_BASE_URL (did you mean GATEWAY_VLLM_BASE_URL?)" in str(refused)


def test_a_port_in_use_is_named_as_the_setting_to_change(sim):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = _one_failure_line(GatewayProcess(sim.url, port=port))
    assert f"GATEWAY_PORT {port} is already in use" in message and "free port" in message


def test_a_host_that_does_not_resolve_is_named_as_the_setting_to_change(sim):
    message = _one_failure_line(GatewayProcess(sim.url, GATEWAY_HOST="no-such-host.invalid"))
    assert "GATEWAY_HOST 'no-such-host.invalid'" in message and "127.0.0.1" in message


@pytest.mark.parametrize(
    "name, content, named",
    [
        pytest.param("missing.json", None, "No such file", id="missing"),
        pytest.param("a-directory", "", "Is a directory", id="directory"),
        pytest.param("keys.toml", "keys = [", "keys.toml", id="bad-toml"),
        pytest.param(
            "keys.json",
            '{"keys": [{"name": "a", "key": "sk-in-the-file"}]}',
            "keys.0.key: Extra inputs",
            id="unknown-field",
        ),
        pytest.param(
            "keys.json",
            '{"keys": [{"name": "a", "sha256": "sk-not-a-digest"}]}',
            "keys.0.sha256: String should match",
            id="bad-digest",
        ),
    ],
)
def test_a_bad_keys_file_stops_the_start_in_one_line_naming_the_file(sim, tmp_path, name, content, named):
    path = tmp_path / name
    if content == "":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    proc = GatewayProcess(sim.url, GATEWAY_KEYS_FILE=str(path))
    message = _one_failure_line(proc)
    assert f"keys file {path}" in message and named in message and "GATEWAY_KEYS_FILE" in message
    assert "sk-" not in message  # a value from the file is never shown: it may be a key


def test_a_sqlite_ledger_in_a_directory_that_does_not_exist_is_refused_not_created(sim, tmp_path):
    """A mistyped path would otherwise get new directories and a fresh, empty ledger."""
    missing = tmp_path / "mistyped" / "data"
    message = _one_failure_line(GatewayProcess(sim.url, database_url=f"sqlite:///{missing}/gateway.db"))
    assert f"the directory {missing} of the SQLite ledger at GATEWAY_DATABASE_URL" in message
    assert f"mkdir -p {missing}" in message
    assert not (tmp_path / "mistyped").exists()


def test_start_up_says_how_many_client_keys_and_where_redis_is_and_that_it_answers(sim, tmp_path):
    lines, stderr = _start_up_lines(
        sim.url,
        GATEWAY_API_KEYS="ops:sk-ops-startup",
        GATEWAY_KEYS_FILE=_keys_file(tmp_path, ("team-a", "sk-a-startup"), ("team-b", "sk-b-startup")),
        GATEWAY_REDIS_URL=require_redis(),
        GATEWAY_REDIS_PREFIX=f"startup-{free_port()}",
    )
    [keys] = [line for line in lines if line["msg"].startswith("client keys: ")]
    assert keys["apiKeys"] == 1 and keys["keysFileKeys"] == 2
    assert "1 from GATEWAY_API_KEYS" in keys["msg"] and "2 from the keys file" in keys["msg"]
    [redis] = [line for line in lines if "GATEWAY_REDIS_URL" in line["msg"]]
    assert redis["level"] == "info" and redis["redisReachable"] is True and redis["redisUrl"] == REDIS_URL
    assert "sk-" not in stderr


def test_redis_that_does_not_answer_at_start_up_is_a_warning_naming_its_url(sim):
    port = free_port()
    lines, stderr = _start_up_lines(sim.url, GATEWAY_REDIS_URL=f"redis://gw:s3cret-pw@127.0.0.1:{port}/0")
    [redis] = [line for line in lines if "GATEWAY_REDIS_URL" in line["msg"]]
    assert redis["level"] == "warning" and redis["redisReachable"] is False
    assert (
        f"redis://gw@127.0.0.1:{port}/0 does not answer" in redis["msg"]
        and "GATEWAY_REDIS_FAIL_OPEN=true" in redis["msg"]
    )
    assert "s3cret-pw" not in stderr
