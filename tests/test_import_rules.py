"""The import rules of docs/internals.md, read from the code: every `import` in every module of `app/`
(function-level and type-checking ones included), held against the rules of the map.

- nothing below the edge imports `app.api` (the edge: `app.api`, and the entry points that assemble it);
- adapters (`app.providers`) import no door, no HTTP server framework, and none of the observers or the
  dispatcher that drive them;
- doors (`app.doors`) import no adapter and no HTTP server framework, and of the core only the settled turn's
  record (`app.core.settled`); the core (`app.core`) imports no door;
- doors are peers: no door package (`app/doors/<door>/`) imports another; what doors share is a module of
  `app/doors/` itself (`fields.py`, `signatures.py`, `openai_errors.py`, …);
- the edge names no door: it imports `app.doors.registry` and the shared door modules, never a door package
  (`app.doors.registry` is the one module that lists them);
- the event stream (`app.stream`) and the contract (`app.contract`) import neither doors nor adapters;
- the spine below the observers (contract, stream, providers, doors, pools, catalog, core) imports none of them
  (`app.ledger`, `app.telemetry`, `app.resume`, `app.policy`): they read the settled turn from above.

The rooms stand on floors, in the order a request needs them (`FLOORS`, drawn in docs/internals.md): a module
imports only modules of its own room or of a lower floor, so no import arrow points up.

And two rules of size: no module of `app/` is longer than 600 lines, and `app/` keeps at most ten modules of its
own (files directly under it); the rest lives in its rooms (packages).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

EDGE = ("app.api", "app.main", "app.openapi", "app.__main__")
HTTP_SERVER = ("fastapi", "starlette", "uvicorn", "sse_starlette")
OBSERVERS_AND_DRIVERS = (
    "app.core.dispatcher",
    "app.gateway",
    "app.ledger",
    "app.telemetry.metrics",
    "app.telemetry.logs",
    "app.telemetry.tracing",
    "app.policy",
    "app.resume",
    "app.telemetry.health",
)

OBSERVERS = ("app.ledger", "app.telemetry", "app.resume", "app.policy")
SPINE = ("app.contract", "app.stream", "app.providers", "app.doors", "app.pools", "app.catalog", "app.core")

# The floors of the house, lowest first: a room imports only its own modules and the rooms of lower floors.
FLOORS = (
    ("app.contract", "app.seams", "app.settings", "app.redaction", "app.redis_client", "app.gc_pause"),
    ("app.stream",),
    ("app.providers",),
    ("app.catalog", "app.pools"),
    ("app.core",),
    ("app.doors",),
    ("app.telemetry", "app.ledger"),
    ("app.policy", "app.resume"),
    ("app.admin",),
    ("app.gateway",),
    ("app.server",),
    ("app.api",),
    ("app.main",),
    ("app.openapi", "app.__main__"),
)

MAX_LINES = 600
# Modules still over MAX_LINES while another branch of the refactor splits them (the size test fails while it
# names a module no longer too long).
OVERSIZED_FOR_NOW: set[str] = set()
MAX_TOP_LEVEL_MODULES = 10

# (the modules a rule covers, the imports they may not make, why)
RULES = [
    ("app", ("app.api",), "nothing below the edge imports app.api"),
    ("app.providers", ("app.doors", *HTTP_SERVER, *OBSERVERS_AND_DRIVERS), "an adapter only translates wire events"),
    (
        "app.doors",
        ("app.providers", *HTTP_SERVER, *OBSERVERS_AND_DRIVERS),
        "a door never knows which adapter serves it",
    ),
    ("app.stream", ("app.doors", "app.providers", *HTTP_SERVER), "the event stream knows no door and no adapter"),
    ("app.core", ("app.doors",), "the core knows no door"),
    ("app.contract", ("app.doors", "app.providers", "app.stream", *HTTP_SERVER), "the contract is plain data"),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            if (APP.parent / module.replace(".", "/")).is_dir():  # `from app import api` imports a module
                names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


MODULES = {_module_name(path): _imports(path) for path in sorted(APP.rglob("*.py"))}
DOOR_PACKAGES = sorted(f"app.doors.{path.parent.name}" for path in (APP / "doors").glob("*/__init__.py"))


def _broken(scope: str, forbidden: tuple[str, ...]) -> list[str]:
    """The imports of the modules within `scope` (the edge's excepted) that `forbidden` names."""
    return sorted(
        f"{module} imports {name}"
        for module, names in MODULES.items()
        if _within(module, scope) and not any(_within(module, edge) for edge in EDGE)
        for name in names
        if any(_within(name, banned) for banned in forbidden) and not _within(name, module)
    )


@pytest.mark.parametrize(("scope", "forbidden", "why"), RULES, ids=[rule[0] for rule in RULES])
def test_import_rules(scope, forbidden, why):
    broken = _broken(scope, forbidden)
    assert not broken, f"{why}:\n" + "\n".join(broken)


@pytest.mark.parametrize("room", SPINE)
def test_the_spine_imports_no_observer(room):
    broken = _broken(room, OBSERVERS)
    assert not broken, "the observers read the settled turn from above; the spine never imports them:\n" + "\n".join(
        broken
    )


def test_no_module_is_longer_than_600_lines():
    lengths = {
        path.relative_to(APP.parent).as_posix(): len(path.read_bytes().splitlines())
        for path in sorted(APP.rglob("*.py"))
    }
    too_long = [
        f"{path}: {count} lines"
        for path, count in lengths.items()
        if count > MAX_LINES and path not in OVERSIZED_FOR_NOW
    ]
    assert not too_long, f"a module of more than {MAX_LINES} lines is split by concern:\n" + "\n".join(too_long)
    no_longer = sorted(path for path in OVERSIZED_FOR_NOW if lengths.get(path, 0) <= MAX_LINES)
    assert not no_longer, "OVERSIZED_FOR_NOW names modules that are no longer too long (or gone):\n" + "\n".join(
        no_longer
    )


def test_app_keeps_at_most_ten_top_level_modules():
    top_level = sorted(path.name for path in APP.glob("*.py"))
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, (
        f"app/ has {len(top_level)} modules of its own (at most {MAX_TOP_LEVEL_MODULES}); a new one goes into its room: "
        + ", ".join(top_level)
    )


def test_no_door_imports_another_door():
    broken = sorted(
        f"{module} imports {name}"
        for door in DOOR_PACKAGES
        for module, names in MODULES.items()
        if _within(module, door)
        for name in names
        if any(_within(name, other) for other in DOOR_PACKAGES if other != door)
    )
    assert not broken, "doors are peers: what two doors share is a module of app/doors/ itself:\n" + "\n".join(broken)


def test_the_edge_imports_no_door_by_name():
    broken = sorted(
        f"{module} imports {name}"
        for module, names in MODULES.items()
        if any(_within(module, edge) for edge in EDGE)
        for name in names
        if any(_within(name, door) for door in DOOR_PACKAGES)
    )
    assert not broken, "the edge reads the doors from app.doors.registry, never a door by name:\n" + "\n".join(broken)


def test_a_door_imports_of_the_core_only_the_settled_record():
    broken = sorted(
        f"{module} imports {name}"
        for module, names in MODULES.items()
        if _within(module, "app.doors")
        for name in names
        if _within(name, "app.core") and name != "app.core.settled"
    )
    assert not broken, "a door reads a turn through its TurnView and the settled record only:\n" + "\n".join(broken)


def _floor(module: str) -> tuple[int, str] | None:
    for level, rooms in enumerate(FLOORS):
        for room in rooms:
            if _within(module, room):
                return level, room
    return None


def test_every_room_has_a_floor():
    assert [module for module in MODULES if module != "app" and _floor(module) is None] == []


def test_no_import_points_up():
    """A module imports its own room and the floors below it, never a room above (FLOORS)."""
    upward = sorted(
        f"{module} imports {name}"
        for module, names in MODULES.items()
        if (here := _floor(module)) is not None
        for name in names
        if (there := _floor(name)) is not None and there[1] != here[1] and there[0] >= here[0]
    )
    assert not upward, "imports that point up (or across a floor):\n" + "\n".join(upward)


def test_the_rules_read_real_imports():
    """The reader finds the imports the rules are about (a reader that found none would pass every rule)."""
    assert any(_within(name, "app.api") for name in MODULES["app.main"])
    assert {"app.doors.gemini", "app.doors.unified"} <= set(DOOR_PACKAGES)
    assert set(DOOR_PACKAGES) <= MODULES["app.doors.registry"]  # `from app.doors import gemini, …` is read
    assert any(
        _within(name, "app.contract")
        for module, names in MODULES.items()
        if _within(module, "app.providers")
        for name in names
    )
    assert any(_within(name, "app.resume") for name in MODULES["app.gateway"])
