"""Start-up as an operator sees it, on real `python -m app` processes: failures say in one readable line
what failed and how to fix it (naming the database URL without its password), never a traceback."""

from __future__ import annotations

import json

import pytest

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
            "sqlite:////proc/no-such-dir/gateway.db", "sqlite:////proc/no-such-dir/gateway.db", "writable", id="sqlite-unwritable"
        ),
    ],
)
def test_a_failed_start_says_what_and_how_to_fix_it_in_one_line(sim, url, shown, fix):
    port = free_port()
    code, lines, stderr = _failed_start(sim.url, url.format(port=port))
    assert code != 0
    assert "Traceback" not in stderr and "s3cret-pw" not in stderr
    errors = [line for line in lines if line["level"] == "error" and "cannot start" in line["msg"]]
    assert len(errors) == 1, stderr
    message = errors[0]["msg"]
    assert "\n" not in message and "exc" not in errors[0]
    assert shown.format(port=port) in message and "GATEWAY_DATABASE_URL" in message
    assert fix in message
