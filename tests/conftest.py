"""Shared rig: the vendor simulator and gateways under uvicorn on loopback, and an SSE client."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import httpx
import hypothesis
import pytest

from app.core.job import TurnObserver
from app.main import create_app
from app.settings import Settings
from simulator.app import create_simulator
from tests.conformance import Frame, check_frames, parse_sse
from tests.servers import ServerThread, stop_all

HERE = Path(__file__).parent

PROVIDER_KEYS = {
    "anthropic": "sk-ant-test-PROVIDERKEY-0123456789",
    "openai": "sk-openai-test-PROVIDERKEY-0123456789",
    "google": "AIza-test-PROVIDERKEY-0123456789",
}

# Hypothesis profiles: `ci` runs every property-based test at its full size; `dev`, the default outside CI (CI
# runs `.ci/run` with CI=true), at a tenth of it, so a developer can run the suite often. HYPOTHESIS_PROFILE
# names one explicitly (`HYPOTHESIS_PROFILE=ci make test` runs the full size locally).
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
hypothesis.settings.register_profile("ci", print_blob=True)
hypothesis.settings.register_profile("dev", max_examples=10)
hypothesis.settings.load_profile(HYPOTHESIS_PROFILE)


def examples(full: int) -> int:
    """The number of examples a property-based test with its own size runs: `full` under the `ci` profile,
    a tenth of it (at least 10) under `dev`."""
    return full if HYPOTHESIS_PROFILE == "ci" else max(10, full // 10)


# Tiers a developer can run alone (`pytest -m agents`) or leave out (`pytest -m "not agents and not browser"`);
# pyproject.toml registers the markers. A test's place or kind says its tier, so a new file joins its tier
# without a list to update:
#   agents    tests/agents/: the agent CLIs and SDKs (node) against the doors
#   browser   a test that takes the `browser` fixture: Chromium driven by Playwright
#   replicas  test_*replicas*.py: several gateway processes sharing a redis-server of their own
#   deploy    test_deploy_*.py: the container and Kubernetes files, checked offline
#   fuzz      every property-based (Hypothesis) test
def _tiers(item: pytest.Item) -> list[str]:
    path = item.path
    tiers = []
    if HERE / "agents" in path.parents:
        tiers.append("agents")
    if "browser" in getattr(item, "fixturenames", ()):
        tiers.append("browser")
    if "replicas" in path.name:
        tiers.append("replicas")
    if path.name.startswith("test_deploy_"):
        tiers.append("deploy")
    if hypothesis.is_hypothesis_test(getattr(item, "obj", None)):
        tiers.append("fuzz")
    return tiers


_CONFIG: list[pytest.Config] = []
_FILES_STARTED: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG.append(config)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Progress that names the file being run: a line when a test file's first test starts (on the controller
    when pytest-xdist runs workers, which report each test's start to it)."""
    config = _CONFIG[-1] if _CONFIG else None
    if config is None or hasattr(config, "workerinput") or config.option.verbose > 0:
        return  # a worker's output is not shown; -v names every test already
    path = nodeid.split("::", 1)[0]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if path in _FILES_STARTED or reporter is None:
        return
    _FILES_STARTED.add(path)
    if reporter._tw.width_of_current_line:  # after a line of dots
        reporter.write("\n")
    reporter.write_line(f"started {path} ({len(_FILES_STARTED)} files so far)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for tier in _tiers(item):
            item.add_marker(tier)


@dataclass
class StreamResult:
    status: int
    headers: httpx.Headers
    text: str
    frames: list[Frame] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def terminal(self) -> dict[str, Any]:
        return self.events[-1]

    @property
    def message(self) -> dict[str, Any]:
        return self.terminal["message"]

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def json(self) -> Any:
        return json.loads(self.text)


class FinishedTurns(TurnObserver):
    """A turn observer that lets a test wait (from its own thread) for a turn to finish."""

    def __init__(self) -> None:
        self._done: dict[str, Any] = {}
        self._cond = threading.Condition()

    def turn_finished(self, job: Any, settled: Any) -> None:
        with self._cond:
            self._done[job.turn.request_id] = job
            self._cond.notify_all()

    def wait(self, request_id: str, timeout: float = 10) -> Any:
        with self._cond:
            assert self._cond.wait_for(lambda: request_id in self._done, timeout), f"turn {request_id} never finished"
            return self._done[request_id]


class Gateway:
    """A gateway server plus the calls tests make to it."""

    def __init__(self, server: ServerThread, sim: "Simulator") -> None:
        self.server = server
        self.url = server.url
        self.sim = sim
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.finished = FinishedTurns()
        self.state.dispatcher.observers.append(self.finished)

    def job(self, request_id: str, timeout: float = 10) -> Any:
        """The finished turn (dispatcher job) for a request id."""
        return self.finished.wait(request_id, timeout)

    @property
    def state(self) -> Any:
        return self.server.app.state.gateway

    def stream(self, body: dict[str, Any], path: str = "/v1/stream", check: bool = True, **kwargs: Any) -> StreamResult:
        response = self.http.post(path, json=body, **kwargs)
        result = StreamResult(response.status_code, response.headers, response.text)
        if response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream"):
            result.frames = parse_sse(response.text)
            result.events = check_frames(result.frames) if check else [json.loads(f.data) for f in result.frames]
        return result


class Simulator:
    def __init__(self, server: ServerThread) -> None:
        self.server = server
        self.url = server.url
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def seen(self, contains: str) -> list[dict[str, Any]]:
        return self.http.get("/_sim/requests", params={"contains": contains}).json()

    def wait(self, contains: str, until: str = "finished", timeout: float = 10) -> dict[str, Any]:
        response = self.http.get("/_sim/wait", params={"contains": contains, "until": until, "timeout": timeout})
        assert response.status_code == 200, f"simulator never saw {contains!r} reach {until}: {response.text}"
        return response.json()


def settings_for(sim_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        anthropic_api_key=PROVIDER_KEYS["anthropic"],
        openai_api_key=PROVIDER_KEYS["openai"],
        gemini_api_key=PROVIDER_KEYS["google"],
        anthropic_base_url=f"{sim_url}/anthropic",
        openai_base_url=f"{sim_url}/openai/v1",
        google_base_url=f"{sim_url}/google",
        base_urls={"compat": f"{sim_url}/compat/v1"},  # tests/catalog.json: a keyless openai-completions provider
        catalog=str(HERE / "catalog.json"),
        retries=1,
        retry_backoff_ms=5,
        retry_after_cap_ms=1500,
        late_frame_grace=2.0,
        database_url=f"sqlite:///{_test_data_dir()}/gateway-{uuid.uuid4().hex[:12]}.db",  # never ./data
    )
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def sim() -> Iterator[Simulator]:
    server = ServerThread(create_simulator(), "simulator").start()
    yield Simulator(server)
    server.stop()


def _gateways(sim: Simulator, **defaults: Any) -> Iterator[Any]:
    """Yields `make(**settings)`, which starts a gateway (settings over `defaults`); stops them all after."""
    started: list[ServerThread] = []

    def make(**overrides: Any) -> Gateway:
        server = ServerThread(create_app(settings_for(sim.url, **{**defaults, **overrides})), "gateway").start()
        started.append(server)
        gateway = Gateway(server, sim)
        # uvicorn has started; the gateway serves (`/readyz` 200) once its start-up after listening is done.
        server.call(asyncio.wait_for(gateway.state.serving.wait(), 30), timeout=35)
        return gateway

    yield make
    stop_all(started)


@pytest.fixture(scope="session")
def gateway_factory(sim: Simulator) -> Iterator[Any]:
    yield from _gateways(sim)


@pytest.fixture(scope="session")
def gateway(gateway_factory: Any) -> Gateway:
    return gateway_factory()


_TEST_DATA: list[Path] = []


def _test_data_dir() -> Path:
    """One temporary directory per test session for the gateways' SQLite ledgers."""
    if not _TEST_DATA:
        _TEST_DATA.append(Path(tempfile.mkdtemp(prefix="gateway-tests-")))
    return _TEST_DATA[0]


@pytest.fixture(scope="session", autouse=True)
def _remove_test_data() -> Iterator[None]:
    yield
    for path in _TEST_DATA:
        shutil.rmtree(path, ignore_errors=True)


# PostgreSQL for the ledger tests; set GATEWAY_TEST_POSTGRES_URL= (empty) to skip the postgres variants.
POSTGRES_URL = os.environ.get("GATEWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

# The shared Redis of the limit, pool-state and resumable-stream tests; GATEWAY_TEST_REDIS_URL points them at
# another one (a machine whose 6379 is someone else's). Tests that restart Redis start their own
# (tests/redisproc.py). Pinged once, by the first test that needs it, never at collection.
REDIS_URL = os.environ.get("GATEWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
_REDIS_UP: list[bool] = []


def require_redis() -> str:
    """`REDIS_URL`, or skip the calling test when nothing answers there."""
    if not _REDIS_UP:
        import redis

        try:
            _REDIS_UP.append(bool(redis.Redis.from_url(REDIS_URL, socket_timeout=0.5).ping()))
        except redis.RedisError:
            _REDIS_UP.append(False)
    if not _REDIS_UP[0]:
        pytest.skip(f"no Redis at {REDIS_URL} (set GATEWAY_TEST_REDIS_URL)")
    return REDIS_URL


@pytest.fixture
def shared_redis() -> str:
    """The shared Redis's URL (the test is skipped when it does not answer)."""
    return require_redis()


def run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync or async test code (in a thread with its own loop)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


async def _postgres_exec(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: Any, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty ledger per test: a SQLite temp file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/ledger.db"
        return
    if not POSTGRES_URL:
        pytest.skip("GATEWAY_TEST_POSTGRES_URL is empty")
    schema = f"gwtest_{uuid.uuid4().hex[:16]}"
    run_async(_postgres_exec(f"CREATE SCHEMA {schema}"))
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}search_path={schema}"
    finally:
        run_async(_postgres_exec(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


@pytest.fixture
def ledger_gateway(sim: "Simulator", ledger_url: str) -> Iterator[Any]:
    """`make(**settings)`: gateways on this test's ledger, stopped when the test ends."""
    yield from _gateways(sim, database_url=ledger_url)


def marker() -> str:
    """A unique string to put in a prompt, so the simulator's log can be searched for this request."""
    return f"m-{uuid.uuid4().hex[:12]}"


def turn(model: str, prompt: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "context": {"messages": [{"role": "user", "content": prompt or marker()}]}}
    body.update(extra)
    # Coalescing off unless a test asks for it: then every wire delta is one event and sequences are exact
    # whatever the machine's timing (coalescing itself is covered by tests/stream/test_turn.py and the replays).
    body.setdefault("options", {}).setdefault("throttleMs", 0)
    return body
