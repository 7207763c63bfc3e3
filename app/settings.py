"""Configuration from the environment (README.md, Configuration). Every setting is `GATEWAY_<NAME>` unless noted."""

from __future__ import annotations

import difflib
import json
import os
from typing import Annotated, Any, Collection, Mapping

from pydantic import AliasChoices, Field, NonNegativeInt, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# `GATEWAY_*` names the gateway never reads and never flags as unknown (`unknown_variables`): the test suite's own
# (`GATEWAY_TEST_POSTGRES_URL`, `GATEWAY_TEST_BROWSER`, … under one reserved prefix) and what the clients in
# examples/ read (where the gateway is, which model to ask for).
RESERVED_PREFIX = "GATEWAY_TEST_"
CLIENT_VARIABLES = frozenset({"GATEWAY_URL", "GATEWAY_MODEL"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore", populate_by_name=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port to listen on (0: any free port)")
    workers: int = Field(
        default=1,
        ge=1,
        description="worker processes accepting on one port (`python -m app` and the container's entrypoint start "
        "them under uvicorn's supervisor); more than one needs GATEWAY_REDIS_URL, where they share limits, budgets, "
        "pools and resumable streams (docs/performance.md, Several workers)",
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
    responses_max_bytes: int | None = Field(
        default=None,
        ge=1,
        description="the largest conversation a request may build on stored responses with (the stored documents "
        "it reads plus its body); beyond it: 413. Default: GATEWAY_MAX_BODY_BYTES",
    )
    responses_max_per_key: int = Field(
        default=10_000, ge=1, description="stored responses kept per client key; a new one deletes the key's oldest"
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
    first_content_deadline: float = Field(
        default=90.0,
        ge=0,
        description="seconds from a turn's arrival until its first event reaches the client, across retries and "
        "fallbacks; past it the client gets its error even if retries remain (0: none)",
    )
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
        default=True,
        description="Redis down or slow: admit under each replica's own per-key limits (true; N replicas admit up "
        "to N times a limit) or refuse with 503 (false)",
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

    # Adapters and vendor SDKs are imported when first needed (docs/operations.md, Start-up and warm-up).
    warm_up: bool = Field(
        default=True,
        description="once the server listens, import every served provider's adapter and SDK in the background "
        "(false: only when a turn first needs each; less memory for vendors never used, that turn waits)",
    )

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

    trace_probes: bool = Field(
        default=False,
        description="with tracing on, give /healthz, /readyz, /metrics and the demo simulator's routes server "
        "spans too (default: left out of traces)",
    )
    budget_webhook_url: str | None = Field(
        default=None,
        description="POST a JSON alert here once when a team's or key's budget passes 80 % and once at 100 % per period",
    )
    budget_webhook_timeout: float = Field(default=2.0, gt=0, description="seconds one budget webhook POST may take")

    log_level: str = Field(default="info", description="one of " + ", ".join(LOG_LEVELS))
    log_format: str | None = Field(
        default=None,
        description="`text` (one readable line each) or `json` (one JSON object each); default: text when stderr "
        "is a terminal, else json",
    )
    log_content: bool = False
    allow_unknown_variables: bool = Field(
        default=False,
        description="start even though the environment holds `GATEWAY_*` variables that name no setting "
        "(by default such a variable, most likely a typo, stops the start naming the closest setting)",
    )
    # Tracing (OTEL_* variables, docs/operations.md, Traces): a client's W3C `baggage` (its tenant's data) is
    # sent to vendors with the trace context only when the operator opts in.
    forward_baggage: bool = Field(
        default=False,
        description="with tracing on, send a client's W3C `baggage` to vendors with the trace context "
        "(off: vendors get `traceparent`/`tracestate` only)",
    )

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

    @field_validator("log_format")
    @classmethod
    def _known_log_format(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.strip().lower() not in ("text", "json"):
            raise ValueError("not a log format (text or json)")
        return value.strip().lower()

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
        return builtin.get(name) or self.base_urls.get(name) or os.environ.get(base_url_variable(name)) or None


def base_url_variable(name: str) -> str:
    """`GATEWAY_<NAME>_BASE_URL`: the variable that gives catalog provider `name` its base URL."""
    return "GATEWAY_" + name.upper().replace("-", "_").replace(".", "_") + "_BASE_URL"


def setting_variables() -> frozenset[str]:
    """Every environment variable a `Settings` field reads (derived from the model: a setting added anywhere is
    known here)."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for field_name, field in Settings.model_fields.items():
        choices = getattr(field.validation_alias, "choices", None)
        if choices:
            names.update(str(choice).upper() for choice in choices)
        else:
            names.add(f"{prefix}{field_name}".upper())
    return frozenset(names)


def unknown_variables(environ: Mapping[str, str], also_known: Collection[str] = ()) -> list[str]:
    """The `GATEWAY_*` variables of `environ` that no setting reads: not a `Settings` field, not in `also_known`
    (the catalog's `GATEWAY_<NAME>_BASE_URL` and `keyEnv` names), not reserved (`RESERVED_PREFIX`,
    `CLIENT_VARIABLES`). Names compare without case, as pydantic-settings reads them."""
    known = setting_variables() | CLIENT_VARIABLES | {name.upper() for name in also_known}
    return sorted(
        name
        for name in environ
        if name.upper().startswith("GATEWAY_")
        and name.upper() not in known
        and not name.upper().startswith(RESERVED_PREFIX)
    )


def closest_variable(name: str, known: Collection[str]) -> str | None:
    """The known variable `name` is most likely a typo of (`GATEWAY_API_KEY` → `GATEWAY_API_KEYS`), or None."""
    suffixes = {known_name.upper().removeprefix("GATEWAY_"): known_name for known_name in known}
    match = difflib.get_close_matches(name.upper().removeprefix("GATEWAY_"), list(suffixes), n=1, cutoff=0.6)
    return suffixes[match[0]] if match else None
