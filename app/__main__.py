"""`python -m app`: serve the gateway with the settings from the environment."""

import uvicorn

from app.logs import configure_logging
from app.server import BoundedHttpToolsProtocol
from app.settings import Settings


def main() -> None:
    settings = Settings()
    log_config = configure_logging(settings.log_level)
    uvicorn.run(
        "app.main:app",
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=log_config,
        loop="uvloop",
        http=BoundedHttpToolsProtocol,  # httptools, with bounds on request headers (GATEWAY_MAX_HEADER_*)
        # Must outlive the drain (GATEWAY_DRAIN_TIMEOUT) plus the SSE responses' margin after it.
        timeout_graceful_shutdown=int(settings.drain_timeout) + 20,
    )


if __name__ == "__main__":
    main()
