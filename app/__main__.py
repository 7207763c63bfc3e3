"""`python -m app`: serve the gateway with the settings from the environment: one process, or with
`GATEWAY_WORKERS=N` (N > 1, which needs `GATEWAY_REDIS_URL`) N worker processes under uvicorn's supervisor
(app/server/workers.py). Every start-up check runs here, before any worker starts."""

import logging
import sys

import uvicorn
from pydantic import ValidationError
from pydantic_settings import SettingsError

from app.catalog import Catalog, CatalogError
from app.telemetry.logs import configure_logging
from app.server.hosting import BoundedHttpToolsProtocol
from app.settings import Settings
from app.server.startup_messages import (
    StartupError,
    ledger_directory_missing,
    listen_refused,
    settings_problems,
    workers_need_redis,
)

STARTUP_FAILURE = 3  # uvicorn's exit status when the server could not start


def main() -> None:
    try:
        settings = Settings()
    except (ValidationError, SettingsError) as exc:  # a bad environment variable: named in one line, never its value
        configure_logging("info")
        logging.getLogger("gateway").error("start-up failed: %s", settings_problems(exc))
        sys.exit(STARTUP_FAILURE)
    log_config = configure_logging(settings.log_level, settings.log_format)
    try:  # a bad catalog file stops here, in one readable line, before the port is bound
        Catalog.load(settings.catalog)
    except CatalogError as exc:
        logging.getLogger("gateway").error("start-up failed: %s", exc)
        sys.exit(STARTUP_FAILURE)
    try:
        if settings.workers > 1 and not settings.redis_url:
            raise workers_need_redis(settings.workers)
        listen_refused(settings.host, settings.port)  # the port taken or the host unknown: said before the app starts
        missing = ledger_directory_missing(settings.database_url, Settings.model_fields["database_url"].default)
        if missing is not None:
            raise missing
    except StartupError as exc:
        logging.getLogger("gateway").error("%s", exc)
        sys.exit(STARTUP_FAILURE)
    config = uvicorn.Config(
        "app.main:app",
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=log_config,
        loop="uvloop",
        http=BoundedHttpToolsProtocol,  # httptools, with bounds on request headers (GATEWAY_MAX_HEADER_*)
        # Must outlive the drain (GATEWAY_DRAIN_TIMEOUT) plus the SSE responses' margin after it.
        timeout_graceful_shutdown=int(settings.drain_timeout) + 20,
        workers=settings.workers,
    )
    if settings.workers > 1:
        from app.server.workers import serve_workers

        sys.exit(serve_workers(config))
    server = uvicorn.Server(config)  # keeps listening while the app drains (app.server.shutdown.DrainGate)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main()
