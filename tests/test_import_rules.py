"""The import rules of docs/internals.md, read from the code: every `import` in every module of `app/`
(function-level and type-checking ones included), held against the rules of the map.

- nothing below the edge imports `app.api` (the edge: `app.api`, and the entry points that assemble it);
- adapters (`app.providers`) import no door, no HTTP server framework, and none of the observers or the
  dispatcher that drive them;
- doors (`app.doors`) import no adapter and no HTTP server framework;
- the event stream (`app.stream`) and the contract (`app.contract`) import neither doors nor adapters.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

EDGE = ("app.api", "app.main", "app.openapi", "app.__main__")
HTTP_SERVER = ("fastapi", "starlette", "uvicorn", "sse_starlette")
OBSERVERS_AND_DRIVERS = (
    "app.core.dispatcher", "app.gateway", "app.ledger", "app.telemetry.metrics", "app.telemetry.logs", "app.telemetry.tracing", "app.policy",
    "app.resume", "app.telemetry.health",
)

# (the modules a rule covers, the imports they may not make, why)
RULES = [
    ("app", ("app.api",), "nothing below the edge imports app.api"),
    ("app.providers", ("app.doors", *HTTP_SERVER, *OBSERVERS_AND_DRIVERS), "an adapter only translates wire events"),
    ("app.doors", ("app.providers", *HTTP_SERVER, *OBSERVERS_AND_DRIVERS), "a door never knows which adapter serves it"),
    ("app.stream", ("app.doors", "app.providers", *HTTP_SERVER), "the event stream knows no door and no adapter"),
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


@pytest.mark.parametrize(("scope", "forbidden", "why"), RULES, ids=[rule[0] for rule in RULES])
def test_import_rules(scope, forbidden, why):
    broken = sorted(
        f"{module} imports {name}"
        for module, names in MODULES.items()
        if _within(module, scope) and not any(_within(module, edge) for edge in EDGE)
        for name in names
        if any(_within(name, banned) for banned in forbidden) and not _within(name, module)
    )
    assert not broken, f"{why}:\n" + "\n".join(broken)


def test_the_rules_read_real_imports():
    """The reader finds the imports the rules are about (a reader that found none would pass every rule)."""
    assert any(_within(name, "app.api") for name in MODULES["app.main"])
    assert any(_within(name, "app.contract") for module, names in MODULES.items() if _within(module, "app.providers") for name in names)
