"""Configuration from the environment (README.md, Configuration). Every setting is `GATEWAY_<NAME>` unless noted."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

from pydantic import AliasChoices, Field, NonNegativeInt, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port to listen on (0: any free port)")
    workers: int = Field(
        default=1,
        ge=1,
        description="worker processes; the container's entrypoint starts them (deploy/docker-entrypoint.sh), "
        "`python -m app` serves one and refuses more",
    )
    allowed_hosts: str | None = Field(
        default=None,
        description="comma-separated Host names requests may carry (`*`: any); default: the loopback names when "
        "bound to a loopback address, else any (docs/limits.md, DNS rebinding)",
    )
    api_keys: SecretStr = Field(default=SecretStr(""), description="comma-separated `name:key` or `key`")

    # Provider keys use the vendors' own variable names.
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY"))
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    gemini_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("GEMINI_API_KEY", "GOOGLE_API_KEY")
    )
    anthropic_base_url: str | None = None
    openai_base_url: str | None = None
    google_base_url: str | None = None
    base_urls: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description='catalog provider name → base URL, a JSON object such as {"vllm": "http://127.0.0.1:8000/v1"} '
        "(also `GATEWAY_<NAME>_BASE_URL`)",
    )

    catalog: str | None = None
    database_url: str = "sqlite:///./data/gateway.db"
    retain_content: bool = Field(default=True, description="store the AssistantMessage in request records")
    responses_retention_days: float = Field(
        default=30.0, gt=0, description="days a stored response (the Responses door's store: true) is kept"
    )

    # Request ledger (app/ledger/). Record writes are queued and written in batches by one task.
    ledger_queue_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1,
        description="memory that record writes waiting for the store may use; beyond, writes are dropped, counted and logged",
    )
    ledger_batch_max: int = Field(default=500, ge=1, description="record writes per database transaction")
    ledger_batch_delay_ms: float = Field(
        default=20.0,
        ge=0,
        le=10_000,
        description="how long the record writer gathers writes before a batch (a records read or shutdown cuts it short)",
    )
    ledger_flush_timeout_s: float = Field(
        default=10.0, ge=0, description="at shutdown, how long to flush queued writes"
    )
    ledger_ping_timeout_s: float = Field(
        default=2.0, gt=0, description="/readyz: how long the store may take to answer"
    )
    ledger_pool_size: int = Field(default=10, ge=1, description="PostgreSQL: connections in the pool")
    ledger_heartbeat_s: float = Field(
        default=10.0, gt=0, description="how often this process refreshes its heartbeat row in the ledger"
    )
    ledger_instance_stale_s: float = Field(
        default=60.0,
        gt=0,
        description="a gateway process whose heartbeat is this old is gone; its open records are interrupted",
    )
    throttle_ms: int = Field(default=50, ge=0, le=10_000)
    demo: bool = False
    console: bool | None = Field(
        default=None, description="serve the web console at /console (default: on in demo mode)"
    )

    # Timeouts, in seconds. Each ends a turn with an `error` that names it.
    connect_timeout: float = 10.0
    first_event_timeout: float = 60.0
    idle_timeout: float = 60.0
    total_timeout: float = 600.0
    keepalive_interval: float = 15.0
    late_frame_grace: float = Field(
        default=1.0, description="how long to keep counting upstream frames after settlement"
    )

    # Retry and fallback (before any content reached the client).
    retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_ms: int = 200
    retry_after_cap_ms: int = 10_000

    # Limits.
    max_body_bytes: int = 4 * 1024 * 1024
    max_json_depth: int = 64
    max_header_bytes: int = Field(
        default=64 * 1024, ge=1024, description="request line plus headers; beyond it: 431 and the connection closed"
    )
    header_timeout: float = Field(
        default=15.0, gt=0, description="seconds a connection may take to send a request's headers (408, closed)"
    )
    max_pending_bytes: int = 256 * 1024
    max_upstream_event_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=0,
        description="one upstream SSE event (or line) at most; a longer one ends the attempt (kind event_too_large). 0: unbounded",
    )
    send_buffer_bytes: int = Field(
        default=256 * 1024,
        ge=0,
        description="SO_SNDBUF of client connections (0: kernel autotuning); bounds what a slow reader buffers",
    )
    max_streams: int = 10_000
    max_streams_per_key: int = 1_000
    drain_timeout: float = Field(
        default=20.0, ge=0, description="on SIGTERM, how long in-flight turns may run before they end with an error"
    )

    # Keys with a policy and replicas (app/policy/, docs/replicas.md).
    keys_file: str | None = Field(
        default=None, description="JSON or TOML file of client keys (SHA-256 digests) with limits"
    )
    keys_reload_interval: float = Field(
        default=2.0, gt=0, description="seconds between checks of the keys file's mtime"
    )
    # The admin API and managed keys, teams, attribution (app/admin/, docs/admin.md).
    admin_keys: SecretStr = Field(
        default=SecretStr(""),
        description="comma-separated admin keys for /v1/admin (`name:key`, or `name:sha256:<hex digest>`); empty: admin API off",
    )
    admin_sync_interval: float = Field(
        default=0.25, gt=0, le=1.0, description="seconds between checks of the managed keys' version in the database"
    )
    allow_unpriced_models: bool = Field(
        default=False,
        description="serve keys with a budget models the catalog has no price for (they then spend 0); per key: allow_unpriced_models",
    )
    redis_url: str | None = Field(
        default=None, description="Redis shared by replicas for limits, spend and resumable streams"
    )
    redis_prefix: str = Field(default="gw", description="prefix of every Redis key the gateway writes")
    redis_timeout: float = Field(
        default=0.25, gt=0, description="seconds any Redis call may take before it counts as failed"
    )
    redis_fail_open: bool = Field(
        default=True, description="Redis down or slow: admit (true) or refuse with 503 (false)"
    )
    resume_grace: float = Field(default=30.0, ge=0, description="seconds a resumable turn runs on with no reader")
    resume_ttl: float = Field(default=300.0, gt=0, description="seconds the events of a resumable turn are kept")
    resume_max_events: int = Field(
        default=10_000, ge=1, description="events kept per resumable turn (older ones dropped)"
    )
    resume_max_turn_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="bytes of frames kept per resumable turn (older ones dropped)"
    )
    resume_max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        description="bytes of frames kept by all resumable turns of a replica (the oldest finished turns dropped first)",
    )
    redis_lease_ttl: float = Field(default=30.0, gt=0, description="seconds a concurrency lease lives without renewal")

    # The cyclic garbage collector (docs/performance.md, The garbage collector).
    gc_threshold: Annotated[tuple[NonNegativeInt, NonNegativeInt, NonNegativeInt], NoDecode] = Field(
        default=(20_000, 20, 100),
        description="gc.set_threshold once serving, as a JSON list; Python's own default is [700, 10, 10]",
    )

    # GET /metrics (docs/operations.md, Metrics).
    metrics_key: SecretStr | None = Field(
        default=None, description="when set, GET /metrics needs `Authorization: Bearer <this key>` (401 otherwise)"
    )
    metrics_key_labels: bool = Field(
        default=True, description="label gateway_key_spend_usd_total with each client key's name (false: one total)"
    )

    budget_webhook_url: str | None = Field(
        default=None,
        description="POST a JSON alert here once when a team's or key's budget passes 80 % and once at 100 % per period",
    )
    budget_webhook_timeout: float = Field(default=2.0, gt=0, description="seconds one budget webhook POST may take")

    log_level: str = Field(default="info", description="one of " + ", ".join(LOG_LEVELS))
    log_content: bool = False

    @field_validator("base_urls", "gc_threshold", mode="before")
    @classmethod
    def _json_from_environment(cls, value: Any, info: ValidationInfo) -> Any:
        """The environment gives these as JSON text (`{"name": "url"}`, `[20000, 20, 100]`); a text that is not
        JSON is a validation error naming the variable, like any other bad setting."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            example = (
                "[20000, 20, 100]" if info.field_name == "gc_threshold" else '{"vllm": "http://127.0.0.1:8000/v1"}'
            )
            raise ValueError(f"not JSON (expected e.g. {example})") from None

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str | None) -> str | None:
        if value and value.partition("://")[0].lower() not in ("redis", "rediss", "unix"):
            raise ValueError("not a Redis URL (redis://host:6379/0, rediss://… for TLS, or unix:///path/to/socket)")
        return value or None

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().lower()
        if level not in LOG_LEVELS:
            raise ValueError("not a log level (one of " + ", ".join(LOG_LEVELS) + ")")
        return level

    def allowed_host_names(self) -> frozenset[str] | None:
        """The Host names (lowercase, without port) requests may carry; None for any."""
        if self.allowed_hosts is None:
            loopback = self.host.strip("[]").lower() in LOOPBACK_NAMES or self.host.startswith("127.")
            return LOOPBACK_NAMES if loopback else None
        names = frozenset(name.strip().strip("[]").lower() for name in self.allowed_hosts.split(",") if name.strip())
        return None if "*" in names else names

    def provider_key(self, name: str) -> str | None:
        secret = {
            "anthropic": self.anthropic_api_key,
            "openai": self.openai_api_key,
            "google": self.gemini_api_key,
        }.get(name)
        return secret.get_secret_value() if secret else None

    def simulator_url(self) -> str | None:
        """In demo mode, where the built-in vendor simulator is mounted on this server."""
        return f"http://127.0.0.1:{self.port}/_simulator" if self.demo else None

    def provider_base_url(self, name: str) -> str | None:
        builtin = {"anthropic": self.anthropic_base_url, "openai": self.openai_base_url, "google": self.google_base_url}
        env_name = "GATEWAY_" + name.upper().replace("-", "_").replace(".", "_") + "_BASE_URL"
        return builtin.get(name) or self.base_urls.get(name) or os.environ.get(env_name) or None
