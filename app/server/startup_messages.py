"""What the gateway says at start-up: failures an operator can fix, in one readable line (what failed and how
to fix it), and which providers are served from where (`log_providers`).

The lifespan (`app.main`) turns the failures it knows (an unusable or unreachable `GATEWAY_DATABASE_URL`)
into a `StartupError`. Starlette reports a failed start-up to the server as the formatted traceback, which
uvicorn logs as one error line; `StartupErrorMessages` replaces that traceback by the `StartupError`'s own
text, so the log shows `start-up failed: <what>; <how to fix it>` and the process exits with uvicorn's start-up
failure code (3). URLs are shown without their password.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sqlite3
import sys
from typing import TYPE_CHECKING, Mapping
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.providers.clouds.registry import CLOUDS

if TYPE_CHECKING:
    import pydantic
    import pydantic_settings

    from app.policy.keyring import KeysConfigError
    from app.contract.catalog_entries import ProviderInfo
    from app.policy.keys import ClientKeys
    from app.providers.registry import ProviderSetup
    from app.settings import Settings

providers_log = logging.getLogger("gateway.providers")

_SECRET_PARAMS = {"password", "sslpassword", "passfile", "sslkey"}
_MAX_REASON = 200


class StartupError(Exception):
    """A start-up failure with what failed and how to fix it; its text is one line without secrets."""

    def __init__(self, what: str, fix: str) -> None:
        self.what = what
        self.fix = fix
        super().__init__(f"start-up failed: {what}; {fix}")


def public_url(url: str) -> str:
    """`url` without its password (in the user part or as a query parameter)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.partition(":")[0]
            netloc = f"{user}@{hostport}" if user else hostport
        params = parse_qsl(parts.query, keep_blank_values=True)
        kept = [(k, v) for k, v in params if k.lower() not in _SECRET_PARAMS]
        if netloc == parts.netloc and len(kept) == len(params):
            return url  # nothing to hide (and `sqlite:////abs/path` keeps its empty host)
        return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept, quote_via=quote), parts.fragment))
    except ValueError:
        return "(a URL that does not parse)"


def _secrets_of(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_PARAMS]
    except ValueError:
        return []
    return [s for s in found if s]


def _reason(exc: BaseException, url: str) -> str:
    """The first line of an exception's text, bounded, with the URL's secrets removed."""
    text = (str(exc).strip().splitlines() or [""])[0] or type(exc).__name__
    for secret in _secrets_of(url):
        text = text.replace(secret, "***")
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


def ledger_url_refused(exc: Exception, url: str) -> StartupError:
    """`GATEWAY_DATABASE_URL` names no store the gateway can use."""
    return StartupError(
        f"GATEWAY_DATABASE_URL {public_url(url)} is not a ledger URL ({_reason(exc, url)})",
        "set it to sqlite:///path/to/gateway.db or postgresql://user:password@host:5432/database",
    )


def keys_refused(exc: "KeysConfigError") -> StartupError:
    """`GATEWAY_API_KEYS` or the keys file names keys the gateway cannot serve (the text never holds a key)."""
    return StartupError(" ".join(exc.what.split()), exc.fix)  # a validation error's lines, as one line


def ledger_start_failed(exc: BaseException, url: str) -> StartupError:
    """The store could not be opened, reached or migrated."""
    shown = public_url(url)
    if url.startswith("sqlite"):
        if isinstance(exc, (OSError, sqlite3.Error)):
            return StartupError(
                f"the SQLite ledger file of GATEWAY_DATABASE_URL {shown} cannot be opened or created ({_reason(exc, url)})",
                "make its directory writable by this user, or point GATEWAY_DATABASE_URL at another file",
            )
    else:
        where = f"the PostgreSQL ledger at GATEWAY_DATABASE_URL {shown}"
        name = type(exc).__name__
        if isinstance(exc, socket.gaierror):
            return StartupError(f"{where}: its host name does not resolve", "fix the host in GATEWAY_DATABASE_URL")
        if _refused(exc):
            return StartupError(
                f"{where} refused the connection (nothing listens there)",
                "start PostgreSQL, or point GATEWAY_DATABASE_URL at a running server",
            )
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            return StartupError(
                f"{where} did not answer in time", "check that PostgreSQL runs and the network reaches it"
            )
        if name in ("InvalidPasswordError", "InvalidAuthorizationSpecificationError"):
            return StartupError(
                f"{where} refused the login ({_reason(exc, url)})",
                "check the user and password in GATEWAY_DATABASE_URL",
            )
        if name == "InvalidCatalogNameError":
            return StartupError(
                f"{where}: {_reason(exc, url)}",
                "create that database (createdb), or fix its name in GATEWAY_DATABASE_URL",
            )
        if isinstance(exc, OSError):
            return StartupError(
                f"{where} cannot be reached ({_reason(exc, url)})",
                "start PostgreSQL, or point GATEWAY_DATABASE_URL at a running server",
            )
    return StartupError(
        f"the ledger at GATEWAY_DATABASE_URL {shown} failed to start ({type(exc).__name__}: {_reason(exc, url)})",
        "check GATEWAY_DATABASE_URL and the database's own log",
    )


def _refused(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionRefusedError):
        return True
    # Several addresses tried (IPv4 and IPv6): asyncio raises one OSError naming them all.
    return isinstance(exc, OSError) and (exc.errno == errno.ECONNREFUSED or "Connect call failed" in str(exc))


class StartupErrorMessages:
    """ASGI middleware: a start-up that failed with a `StartupError` is reported by its one-line text instead
    of the traceback Starlette sends with `lifespan.startup.failed`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_plain(message: Message) -> None:
            # Starlette sends this from inside its `except` block: the exception being handled is the failure.
            failure = sys.exc_info()[1]
            if message["type"] == "lifespan.startup.failed" and isinstance(failure, StartupError):
                message = {**message, "message": str(failure)}
            await send(message)

        await self.app(scope, receive, send_plain)


def log_providers(setups: "list[ProviderSetup]", settings: "Settings") -> None:
    """Say at start-up which providers are served, where their key and base URL come from, and whether the
    demo's simulator serves them (logger `gateway.providers`). Keys are never shown, only where they came from."""
    simulator = settings.simulator_url()
    if simulator is not None:
        providers_log.warning(
            "demo mode (GATEWAY_DEMO=1; `make run` sets it unless GATEWAY_DEMO=0): the built-in vendor simulator at "
            "%s serves the providers below; no vendor is called. Set GATEWAY_DEMO=0 and the vendors' keys to use them",
            simulator,
        )
    for setup in setups:
        if not setup.served:
            continue
        shown = public_url(setup.base_url) if setup.base_url else "the SDK's default URL"
        on_simulator = simulator is not None and (setup.base_url or "").startswith(simulator)
        where = f"served by the built-in simulator at {shown}" if on_simulator else f"upstream {shown}"
        on_cloud = ""
        credentials = f"key from {setup.key_from}" if setup.key_from else "no key"
        if setup.cloud is not None:
            cloud = CLOUDS[setup.cloud.kind]
            on_cloud = f" {cloud.describe(setup.cloud)}"
            if not setup.key_from:
                credentials = f"credentials from {cloud.chain}"
        providers_log.info(
            "provider %s (%s)%s: %s (base URL from %s), %s",
            setup.name,
            setup.api,
            on_cloud,
            where,
            setup.base_url_from,
            credentials,
            extra={
                "cloud": setup.cloud.kind if setup.cloud else None,
                "region": setup.cloud.region if setup.cloud else None,
                "provider": setup.name,
                "api": setup.api,
                "baseUrl": shown,
                "baseUrlFrom": setup.base_url_from,
                "keyFrom": setup.key_from,
                "simulator": on_simulator,
            },
        )
    unserved = [f"{setup.name} ({setup.missing})" for setup in setups if not setup.served]
    if unserved:
        providers_log.info("providers not configured (requests for them get 404): %s", ", ".join(unserved))
    if not any(setup.served for setup in setups):
        providers_log.warning(
            "no provider is configured: every turn will get 404; set a vendor's key or GATEWAY_DEMO=1"
        )


def settings_problems(exc: "pydantic.ValidationError | pydantic_settings.SettingsError") -> str:
    """What is wrong with the environment's settings, one line: each variable's name and the problem, never
    its value (it may be a key)."""
    from pydantic import ValidationError

    from app.settings import Settings

    if not isinstance(exc, ValidationError):  # pydantic-settings could not decode a value (its text names the field)
        return f"invalid settings: {_reason(exc, '')} (fix this environment variable)"
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        field_name = str(error["loc"][0]) if error["loc"] else ""
        problem = (
            str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]
        )  # without "Value error, "
        problems.append(f"{_variable(Settings, field_name)}: {problem}")
    return "invalid settings: " + "; ".join(problems) + " (fix these environment variables)"


def _variable(settings_class: type[pydantic.BaseModel], field_name: str) -> str:
    """The environment variable(s) behind a settings field."""
    field = settings_class.model_fields.get(field_name)
    alias = getattr(field, "validation_alias", None)
    choices = getattr(alias, "choices", None)
    if choices:
        return " or ".join(str(choice) for choice in choices)
    if field is None and field_name.isupper():
        return field_name  # already the variable's name (an alias)
    return "GATEWAY_" + field_name.upper()


def unknown_variables_refused(
    environ: Mapping[str, str], providers: "Mapping[str, ProviderInfo]"
) -> StartupError | None:
    """`GATEWAY_*` variables that no setting reads, most likely typos (`GATEWAY_API_KEY` for `GATEWAY_API_KEYS`
    would otherwise start a gateway without auth): each named with the closest known one, never its value.
    Known besides the settings: each catalog provider's `GATEWAY_<NAME>_BASE_URL` and `keyEnv` variables, and
    those of the demo's cloud entries."""
    from app.settings import base_url_variable, closest_variable, setting_variables, unknown_variables

    from app.catalog.demo_clouds import demo_cloud_catalog

    catalog_names = {base_url_variable(name) for name in providers}
    catalog_names.update(name for info in providers.values() for name in info.key_env)
    # The demo's own key variables (set by demo mode in its process, so inherited by what that process starts).
    for demo in demo_cloud_catalog("")["providers"]:
        key_env = demo.get("keyEnv") or []
        catalog_names.update([key_env] if isinstance(key_env, str) else key_env)
    unknown = unknown_variables(environ, catalog_names)
    if not unknown:
        return None
    known = setting_variables() | catalog_names
    named = []
    for name in unknown:
        closest = closest_variable(name, known)
        named.append(f"{name} (did you mean {closest}?)" if closest else name)
    return StartupError(
        f"{', '.join(named)} {'is not a setting' if len(named) == 1 else 'are not settings'} of the gateway",
        "rename or unset "
        + ("it" if len(named) == 1 else "them")
        + " (the settings: README.md, Configuration), or set GATEWAY_ALLOW_UNKNOWN_VARIABLES=true to start anyway",
    )


def demo_clouds_refused(providers: list[str]) -> StartupError:
    """Demo mode with catalog providers on a cloud the simulator does not serve: refused rather than sent to a
    real cloud while start-up says no vendor is called."""
    return StartupError(
        f"demo mode (GATEWAY_DEMO=1) serves every provider from the built-in simulator, but the catalog's cloud "
        f"provider{'s' if len(providers) > 1 else ''} {', '.join(providers)} would call a real cloud",
        "remove them from GATEWAY_CATALOG for the demo (its own Bedrock, Vertex AI and Azure entries stay), "
        "or set GATEWAY_DEMO=0 to call the real services",
    )


def workers_need_redis(workers: int) -> StartupError:
    """`GATEWAY_WORKERS` > 1 without `GATEWAY_REDIS_URL`: each worker process would count the per-key limits,
    budgets' reservations, pools' state and resumable streams alone (N workers: N × each limit)."""
    return StartupError(
        f"GATEWAY_WORKERS={workers} needs GATEWAY_REDIS_URL: without it each worker process counts key, team and "
        "user limits, budget reservations and pool state alone (N workers would allow N times each limit) and "
        "resumes only its own streams",
        "set GATEWAY_REDIS_URL (redis://host:6379/0, the Redis replicas share; docs/replicas.md), "
        "or set GATEWAY_WORKERS=1",
    )


def listen_refused(host: str, port: int) -> None:
    """Raise a `StartupError` naming `GATEWAY_HOST` or `GATEWAY_PORT` when the server could not listen there:
    a host name that does not resolve, an address this machine does not have, a port in use or reserved.
    A trial bind, closed at once (uvicorn binds the same way, with SO_REUSEADDR, right after)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise StartupError(
            f"GATEWAY_HOST {host!r} is not an address or a host name that resolves ({_reason(exc, '')})",
            "set GATEWAY_HOST to an address of this machine, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)",
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as trial:
        trial.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            trial.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(
                    f"GATEWAY_PORT {port} is already in use on {host} (another gateway, or another server)",
                    "stop what listens there, or set GATEWAY_PORT to a free port",
                ) from None
            if exc.errno == errno.EACCES:
                raise StartupError(
                    f"GATEWAY_PORT {port} on {host} may not be used by this user (ports below 1024 are reserved)",
                    "set GATEWAY_PORT to a port of 1024 or above",
                ) from None
            raise StartupError(
                f"GATEWAY_HOST {host} cannot be listened on ({_reason(exc, '')})",
                "set GATEWAY_HOST to an address of this machine, e.g. 127.0.0.1 or 0.0.0.0",
            ) from None


def ledger_directory_missing(url: str, default_url: str) -> StartupError | None:
    """A SQLite `GATEWAY_DATABASE_URL` whose directory does not exist: most likely a mistyped path, which the
    ledger would otherwise create with a fresh, empty ledger in it. Only the default URL's directory
    (`./data`) is created without asking."""
    from pathlib import Path

    from app.ledger import LedgerUrlError
    from app.ledger.sqlite import sqlite_path

    if url == default_url or not url.lower().startswith("sqlite"):
        return None
    try:
        path = sqlite_path(url)
    except LedgerUrlError:
        return None  # the ledger refuses it with its own message
    directory = Path(path).parent
    if path == ":memory:" or directory.is_dir():
        return None
    return StartupError(
        f"the directory {directory} of the SQLite ledger at GATEWAY_DATABASE_URL {public_url(url)} does not exist "
        "(a mistyped path would otherwise get a new, empty ledger)",
        f"create that directory, writable by this user (mkdir -p {directory}), or fix the path in GATEWAY_DATABASE_URL "
        "(sqlite:///relative/path.db or sqlite:////absolute/path.db)",
    )


def log_client_keys(keys: "ClientKeys") -> None:
    """Say at start-up how many client keys are served and from where (never a key)."""
    if not keys.enabled:
        return  # the lifespan warns that auth is off
    from app.policy.keys import load_keys_file

    where = [f"{len(keys.api_keys)} from GATEWAY_API_KEYS"] if keys.api_keys else []
    in_file = 0
    if keys.keys_file is not None:
        in_file = len(load_keys_file(keys.keys_file).keys)  # loaded a moment ago by `ClientKeys`
        where.append(
            f"{in_file} from the keys file {keys.keys_file} (GATEWAY_KEYS_FILE; reloaded when it changes and on SIGHUP)"
        )
    logging.getLogger("gateway").info(
        "client keys: %s; requests need one of them",
        ", ".join(where),
        extra={"apiKeys": len(keys.api_keys), "keysFile": keys.keys_file, "keysFileKeys": in_file},
    )


async def log_redis(settings: "Settings") -> None:
    """With `GATEWAY_REDIS_URL`: say where Redis is and whether it answers now. Redis that does not answer
    does not stop the start (replicas keep serving while it restarts), but the warning names the URL and
    what requests meet meanwhile, instead of the first limited request finding out."""
    url = settings.redis_url
    if not url:
        return
    from redis.asyncio import Redis

    shown = public_url(url)
    client = Redis.from_url(url, socket_timeout=settings.redis_timeout, socket_connect_timeout=settings.redis_timeout)
    try:
        await client.ping()
    except Exception as exc:  # whatever the client raises, the start goes on: said once, with the URL
        meanwhile = (
            "each replica enforces the per-key limits alone (GATEWAY_REDIS_FAIL_OPEN=true)"
            if settings.redis_fail_open
            else "requests that need it are refused with 503 (GATEWAY_REDIS_FAIL_OPEN=false)"
        )
        logging.getLogger("gateway").warning(
            "Redis at GATEWAY_REDIS_URL %s does not answer (%s: %s); until it does, %s",
            shown,
            type(exc).__name__,
            _reason(exc, url),
            meanwhile,
            extra={"redisUrl": shown, "redisReachable": False},
        )
    else:
        logging.getLogger("gateway").info(
            "Redis at GATEWAY_REDIS_URL %s answers: limits, spend and resumable streams are shared with other replicas",
            shown,
            extra={"redisUrl": shown, "redisReachable": True},
        )
    finally:
        await client.aclose()
