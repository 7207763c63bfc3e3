"""`python -m app`: serve the gateway with the settings from the environment."""

import uvicorn

from app.settings import Settings


def main() -> None:
    settings = Settings()
    uvicorn.run(
        "app.main:app",
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        loop="uvloop",
        http="httptools",
        timeout_graceful_shutdown=30,
    )


if __name__ == "__main__":
    main()
