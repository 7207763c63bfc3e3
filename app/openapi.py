"""`python -m app.openapi` writes the OpenAPI document to `openapi/openapi.json` (committed; a test keeps it
current). The document is built by `app.api.openapi` from the app; this command alone imports both."""

from __future__ import annotations

import sys
from pathlib import Path

from app.api.openapi import SPEC_PATH, render
from app.main import create_app
from app.settings import Settings


def main() -> None:
    text = render(create_app(Settings(_env_file=None, demo=False)))
    SPEC_PATH.parent.mkdir(exist_ok=True)
    SPEC_PATH.write_text(text)
    print(
        f"wrote {SPEC_PATH.relative_to(Path.cwd()) if SPEC_PATH.is_relative_to(Path.cwd()) else SPEC_PATH}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
