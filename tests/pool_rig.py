"""Deployments of a pool for the tests: each its own simulator on its own port, behind a knob that the test turns
to make that deployment slow, throttled (a real 429 with Retry-After) or stalled, by adding the simulator's own
scenario and fault parameters to the model id of each request it receives (the simulator then speaks the
vendor's real wire format for it). Each deployment counts the requests it received."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Iterator

from simulator.app import create_simulator
from tests.conftest import PROVIDER_KEYS
from tests.servers import ServerThread

KEY_ENV = "POOL_TEST_ANTHROPIC_KEY"  # the key variable of every deployment's provider entry

SLOW = ";delay_ms=40"  # every frame 40 ms apart: a slower first token and slower gaps
THROTTLED = ";fault=http;at=before_headers;status=429;retry_after={seconds}"
STALLED = ";fault=hang;at=before_headers"
SERVER_ERROR = ";fault=http;at=before_headers;status=500"


class Knob:
    """ASGI wrapper: appends `suffix` to the `model` of every JSON body it passes on (or, while `once` holds
    any, the first of `once`, used up), and counts them."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.suffix = ""
        self.once: list[str] = []
        self.count = 0
        self.lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].startswith("/_sim"):
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        with self.lock:
            self.count += 1
            suffix = self.once.pop(0) if self.once else self.suffix
        if suffix:
            data = json.loads(body)
            data["model"] = data["model"] + suffix
            body = json.dumps(data).encode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": headers}, replay, send)


class Deployment:
    """A simulated deployment: a simulator of its own behind a `Knob`, named `name` in the catalog."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.knob = Knob(create_simulator())
        self.server = ServerThread(self.knob, f"deployment-{name}").start()
        self.base_url = f"{self.server.url}/anthropic"

    @property
    def count(self) -> int:
        with self.knob.lock:
            return self.knob.count

    def set(self, suffix: str) -> None:
        """Every request from now on gets `suffix` (and any one-shot suffixes still pending are dropped)."""
        with self.knob.lock:
            self.knob.suffix = suffix
            self.knob.once = []

    def next(self, *suffixes: str) -> None:
        """The next requests get `suffixes`, one each, before the steady suffix applies again."""
        with self.knob.lock:
            self.knob.once = list(suffixes)

    def stop(self) -> None:
        self.server.stop()


def running_deployments(*names: str) -> Iterator[list[Deployment]]:
    """A module fixture's body (`yield from`): fake deployments named `names`, stopped after the module's tests."""
    made = [Deployment(name) for name in names]
    yield made
    for d in made:
        d.stop()


def pool_catalog(path: Path, pools: dict[str, dict[str, Any]], deployments: list[Deployment]) -> Path:
    """A catalog file with one anthropic-messages provider entry per deployment and the given pool routes
    (`{route name: {"strategy": ..., "deployments": [...], "fallback"?: [...]}}`)."""
    routes = []
    for name, spec in pools.items():
        route: dict[str, Any] = {"name": name, "pool": {k: v for k, v in spec.items() if k != "fallback"}}
        if "fallback" in spec:
            route["fallback"] = spec["fallback"]
        routes.append(route)
    data = {
        "providers": [{"name": d.name, "api": "anthropic-messages", "keyEnv": KEY_ENV} for d in deployments],
        "models": [{"provider": d.name, "id": "text", "cost": {"input": 3, "output": 15}} for d in deployments],
        "routes": routes,
    }
    path.write_text(json.dumps(data))
    return path


def state_of_its_own(pools: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The same pools, each deployment given a state of its own pool's (its model id `text;pool=<pool>`, which
    the simulator ignores, its name still `<provider>/text`): a deployment's cooldown, quotas and latency are
    its provider/model's, shared by every pool listing it, so tests that cool or slow one pool's deployments
    leave the other pools' alone."""
    out: dict[str, dict[str, Any]] = {}
    for pool, spec in pools.items():
        listed = [
            {"name": f"{d['provider']}/{d['model']}", **d, "model": f"{d['model']};pool={pool}"}
            for d in spec["deployments"]
        ]
        out[pool] = {**spec, "deployments": listed}
    return out


def base_urls(deployments: list[Deployment]) -> dict[str, str]:
    return {d.name: d.base_url for d in deployments}


PROVIDER_KEY = PROVIDER_KEYS["anthropic"]
