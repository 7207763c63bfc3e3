"""Client keys with a policy: the keys file (`GATEWAY_KEYS_FILE`), merged with `GATEWAY_API_KEYS`.

The file (JSON, or TOML when its name ends in `.toml`) names each client key and gives its SHA-256 digest
(hex) — never the key itself — and the key's limits. Every limit is optional; absent or 0 means unlimited
(but for `concurrent_streams`, whose default is `GATEWAY_MAX_STREAMS_PER_KEY`):

    [[keys]]
    name = "team-a"
    sha256 = "<64 hex digits: sha256 of the bearer key>"
    requests_per_minute = 60        # sliding 60-second window
    tokens_per_minute = 200000      # tokens (usage.totalTokens) of turns settled in the current minute
    concurrent_streams = 4          # turns and resumptions in flight at once, across replicas
                                    # (absent or 0: GATEWAY_MAX_STREAMS_PER_KEY, per replica)
    budget_usd_per_day = 5.0        # spend (usage.cost.total) of turns started this UTC day
    budget_usd_per_month = 100.0    # ... this UTC month
    user_budget_usd_per_day = 0.5   # each end user's own day budget among the key's turns (docs/admin.md)
    models = ["anthropic/*", "fast"]   # glob patterns (empty: any); see docs/replicas.md
    allow_unpriced_models = false   # with a budget: serve models the catalog has no price for (at 0)
    team = "platform"               # the key's team (records, spend; a managed team's limits: docs/admin.md)
    tags = ["ci"]                   # the key's default tags (records, spend), when a request sends none

JSON is `{"keys": [ {the same fields} ]}`. Keys managed through the admin API (`app.admin`, docs/admin.md) join
them through `ClientKeys.set_managed`, with the same `KeyPolicy`; a managed key never takes a name of these. `GATEWAY_API_KEYS` keys keep working and have no policy. Every key
has one name and every name one key: a name in both `GATEWAY_API_KEYS` and the file, or one key (digest) under
two names, is refused (`KeysConfigError`; at start the gateway stops, on reload the previous keys stay). The file
is read again when it changes (mtime polled every `GATEWAY_KEYS_RELOAD_INTERVAL` seconds) and on SIGHUP; a file
that does not parse keeps the previous keys (logged). At start a bad file stops the gateway. Reloads while
serving are read and validated in a worker thread, one at a time: SIGHUPs that arrive during a reload make one
more reload after it, however many they are (`watch_keys`), so a burst of signals costs the event loop nothing
and the keys end as the file's last state.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import logging
import os
import signal
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.policy.keyring import ClientKey, KeyRing, KeysConfigError

log = logging.getLogger("gateway.keys")


class KeyPolicy(BaseModel):
    """One key's limits. 0 means unlimited; `models` empty means any model. `concurrent_streams` 0 leaves
    the key to `GATEWAY_MAX_STREAMS_PER_KEY` (`app.policy.admission`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: int = Field(default=0, ge=0)
    tokens_per_minute: int = Field(default=0, ge=0)
    concurrent_streams: int = Field(default=0, ge=0)
    budget_usd_per_day: float = Field(default=0.0, ge=0)
    budget_usd_per_month: float = Field(default=0.0, ge=0)
    # Each end user's (the attribution's `user`) own budget among this key's turns: `USER_SUBJECT` + key + "/" + user
    user_budget_usd_per_day: float = Field(default=0.0, ge=0)
    user_budget_usd_per_month: float = Field(default=0.0, ge=0)
    models: tuple[str, ...] = ()
    # With a budget: may this key be served models the catalog does not price (they then spend 0)?
    allow_unpriced_models: bool = False
    # Its turns drop the sampling fields the serving vendor cannot honour instead of refusing them
    # (`app.providers.sampling`; docs/api.md, "Sampling fields and drop_params").
    drop_params: bool = False
    team: str | None = Field(default=None, min_length=1, max_length=100)
    tags: tuple[str, ...] = Field(default=(), max_length=10)

    def allows_model(self, ref: str) -> bool:
        return not self.models or any(fnmatch.fnmatchcase(ref, pattern) for pattern in self.models)

    @property
    def has_budget(self) -> bool:
        return self.budget_usd_per_day > 0 or self.budget_usd_per_month > 0


UNLIMITED = KeyPolicy()
# The limit store's subject of a team's shared counters: no key name starts with it (`#` is in none that the
# admin API takes; a configured key named so would share the team's counters).
TEAM_SUBJECT = "#team:"
# An end user's budget among one key's turns: `USER_SUBJECT` + key name + "/" + user (no key name has a "/").
USER_SUBJECT = "#user:"


def user_subject(key_id: str, policy: KeyPolicy, user: str | None) -> tuple[str, KeyPolicy] | None:
    """The limit store's subject and budgets of the end user `user` of the key, when its policy gives each end
    user a budget (`user_budget_usd_per_day` / `_per_month`) and the turn names one."""
    if user is None or not (policy.user_budget_usd_per_day or policy.user_budget_usd_per_month):
        return None
    budgets = KeyPolicy(
        budget_usd_per_day=policy.user_budget_usd_per_day, budget_usd_per_month=policy.user_budget_usd_per_month
    )
    return f"{USER_SUBJECT}{key_id}/{user}", budgets


class KeyEntry(KeyPolicy):
    name: str = Field(min_length=1, max_length=200)
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")


class KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[KeyEntry] = Field(default_factory=list)


class KeysFileError(KeysConfigError):
    """The keys file cannot be read, does not validate, or clashes with `GATEWAY_API_KEYS` (the message never
    contains a key)."""

    def __init__(self, what: str, fix: str = "fix the keys file (GATEWAY_KEYS_FILE)") -> None:
        super().__init__(what, fix)


def load_keys_file(path: str | Path) -> KeysFile:
    path = Path(path)
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode()) if path.suffix.lower() == ".toml" else json.loads(raw)
        parsed = KeysFile.model_validate(data)
    except ValidationError as exc:  # each problem by its place in the file, never the value (it may be a key)
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise KeysFileError(f"keys file {path}: {problems}") from None
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise KeysFileError(f"keys file {path}: {exc}") from None
    # Counted once (`list.count` per name made this quadratic: 1.2 s for 5,000 keys).
    duplicates = sorted(name for name, count in Counter(entry.name for entry in parsed.keys).items() if count > 1)
    if duplicates:
        raise KeysFileError(f"keys file {path}: duplicate names {duplicates}")
    return parsed


@dataclass(frozen=True)
class ManagedKey:
    """A key administered through the admin API (`app.admin`), as authentication and the limits need it."""

    name: str
    policy: KeyPolicy
    # Each accepted secret's SHA-256 digest and the wall-clock time it stops being valid (epoch seconds;
    # `math.inf`: no end): the current secret, and after a rotation with overlap the previous one.
    digests: tuple[tuple[bytes, float], ...]


@dataclass(frozen=True)
class _Loaded:
    ring: KeyRing
    policies: dict[str, KeyPolicy]
    mtime: tuple[int, int] | None
    file_digests: tuple[tuple[str, bytes], ...] = ()
    file_policies: tuple[tuple[str, KeyPolicy], ...] = ()


class ClientKeys:
    """Who is calling (`identify`) and what they may do (`policy`): `GATEWAY_API_KEYS` plus the keys file.

    `reload()` swaps both atomically; a request sees either the old or the new set, never a mix.
    """

    def __init__(self, api_keys: list[ClientKey], keys_file: str | None = None, *, required: bool = False) -> None:
        """`required`: auth is on even with no key configured (`GATEWAY_ADMIN_KEYS` set: keys come managed)."""
        self.api_keys = api_keys  # from `GATEWAY_API_KEYS` (`app.policy.keyring.parse_keys`)
        self.keys_file = keys_file or None
        self.required = required
        self._managed: tuple[ManagedKey, ...] = ()
        self._teams: dict[str, KeyPolicy] = {}
        self._loaded = self._load()
        self._refused_mtime: tuple[int, int] | None = None  # the last version of the file that did not load

    def _load(self) -> _Loaded:
        policies: dict[str, KeyPolicy] = {}
        digests: list[tuple[str, bytes]] = []
        mtime = None
        if self.keys_file is not None:
            mtime = _mtime(self.keys_file)
            for entry in load_keys_file(self.keys_file).keys:
                digests.append((entry.name, bytes.fromhex(entry.sha256)))
                policies[entry.name] = (
                    entry  # a KeyPolicy (with its name and digest); not copied: 5,000 copies took 0.1 s
                )
        _refuse_clashes(self.api_keys, digests, self.keys_file)
        return self._with_managed(tuple(digests), tuple(policies.items()), mtime)

    def _with_managed(
        self,
        file_digests: tuple[tuple[str, bytes], ...],
        file_policies: tuple[tuple[str, KeyPolicy], ...],
        mtime: tuple[int, int] | None,
    ) -> _Loaded:
        """The ring and policies of the env and file keys plus the managed keys (a managed key whose name an env
        or file key has is left out, logged: the configured key wins)."""
        taken = {key.name for key in self.api_keys} | {name for name, _ in file_digests}
        managed = [key for key in self._managed if key.name not in taken]
        for key in self._managed:
            if key.name in taken:
                log.warning("managed key %r is ignored: an env or file key has its name", key.name)
        expiring = [(key.name, digest, until) for key in managed for digest, until in key.digests]
        policies = dict(file_policies)
        policies.update((key.name, key.policy) for key in managed)
        ring = KeyRing(self.api_keys, file_digests, expiring, required=self.required)
        return _Loaded(ring, policies, mtime, file_digests, file_policies)

    def set_managed(self, keys: tuple[ManagedKey, ...], teams: dict[str, KeyPolicy] | None = None) -> None:
        """Swap in the managed keys and the teams' shared policies (`app.admin.service`), keeping the env and
        file keys as loaded."""
        self._managed = keys
        self._teams = dict(teams or {})
        loaded = self._loaded
        self._loaded = self._with_managed(loaded.file_digests, loaded.file_policies, loaded.mtime)

    def configured(self) -> list[tuple[str, str, KeyPolicy]]:
        """The env and file keys as the admin API lists them: (name, source `env` | `file`, policy)."""
        listed = [(key.name, "env", UNLIMITED) for key in self.api_keys]
        listed += [(name, "file", policy) for name, policy in self._loaded.file_policies]
        return listed

    @property
    def enabled(self) -> bool:
        return self._loaded.ring.enabled

    def identify(self, authorization: str | None) -> str | None:
        """The caller's key name; None when auth is off. Raises NotAuthenticated for a missing or unknown key."""
        return self._loaded.ring.identify(authorization)

    def policy(self, key_id: str | None) -> KeyPolicy:
        if key_id is None:
            return UNLIMITED
        return self._loaded.policies.get(key_id, UNLIMITED)

    def team_policy(self, key_id: str | None) -> tuple[str, KeyPolicy] | None:
        """The limits and budgets the key's team shares among its keys (`TEAM_SUBJECT` + team name, the team's
        policy), on top of the key's own; None when the key has no team or the team sets none."""
        team = self.policy(key_id).team
        if team is None:
            return None
        policy = self._teams.get(team)
        if policy is None or not (
            policy.requests_per_minute or policy.tokens_per_minute or policy.concurrent_streams or policy.has_budget
        ):
            return None
        return TEAM_SUBJECT + team, policy

    def reload(self) -> bool:
        """Read the keys file again, here (tests, tools). False (and the previous keys kept) when it does not load."""
        if self.keys_file is None:
            return False
        try:
            loaded = self._load()
        except KeysFileError as exc:
            return self._refused(exc)
        return self._swap(loaded)

    async def reload_off_loop(self) -> bool:
        """`reload`, with the file read, parsed and validated in a worker thread (5,000 keys: tens of ms of
        CPU the event loop's streams do not wait for); the new keys are swapped in on the loop."""
        if self.keys_file is None:
            return False
        try:
            loaded = await asyncio.to_thread(self._load)
        except KeysFileError as exc:
            return self._refused(exc)
        return self._swap(loaded)

    def changed(self) -> bool:
        """Whether the file's mtime or size differ from the loaded version and from the last refused one (a
        file that does not load is reported once, not at every poll)."""
        if self.keys_file is None:
            return False
        mtime = _mtime(self.keys_file)
        if mtime is None or mtime in (self._loaded.mtime, self._refused_mtime):
            return False
        self._refused_mtime = mtime
        return True

    def reload_if_changed(self) -> bool:
        return self.changed() and self.reload()

    def _refused(self, exc: KeysFileError) -> bool:
        log.error("keys file not reloaded, keeping the previous keys: %s", exc)
        return False

    def _swap(self, loaded: _Loaded) -> bool:
        self._loaded = loaded
        log.info("keys file reloaded: %d keys with a policy", len(loaded.policies))
        return True


def _refuse_clashes(api_keys: list[ClientKey], digests: list[tuple[str, bytes]], keys_file: str | None) -> None:
    """One name per key and one key per name across `GATEWAY_API_KEYS` and the keys file: a clash would merge
    two identities (records, spend, streams). Raises `KeysFileError` when the file takes part, else
    `KeysConfigError`."""
    entries = [(key.name, hashlib.sha256(key.secret.encode()).digest(), "GATEWAY_API_KEYS") for key in api_keys]
    entries += [(name, digest, "the keys file") for name, digest in digests]
    names: dict[str, str] = {}
    owners: dict[bytes, str] = {}
    for name, digest, source in entries:
        clash: str | None = None
        if name in names:
            clash = f"key name {name!r} is given twice (in {names[name]} and {source})"
        elif digest in owners:
            clash = f"one key is named both {owners[digest]!r} and {name!r} (in {source})"
        if clash is not None:
            fix = "give every key one name and every name one key"
            if keys_file is not None and "keys file" in clash:
                raise KeysFileError(f"keys file {keys_file}: {clash}", fix)
            raise KeysConfigError(clash, fix)
        names[name] = source
        owners[digest] = name


def _mtime(path: str) -> tuple[int, int] | None:
    """Modification time (ns) and size: a rewrite within the same second still shows as a change."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


async def watch_keys(keys: ClientKeys, interval: float) -> None:
    """Reload the keys file on SIGHUP and whenever its mtime changes (polled every `interval` seconds).

    A SIGHUP only sets `hup` (the handler does nothing else on the loop); this one task reloads, off the loop,
    one reload at a time. Signals during a reload set `hup` again, so a burst of any size is one reload
    running and at most one more after it, which reads the file as it is by then."""
    if keys.keys_file is None:
        return
    loop = asyncio.get_running_loop()
    hup = asyncio.Event()
    try:
        loop.add_signal_handler(signal.SIGHUP, hup.set)
        hooked = True
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread (tests), or no SIGHUP
        hooked = False
    try:
        while True:
            try:
                async with asyncio.timeout(interval):
                    await hup.wait()
            except TimeoutError:
                pass
            signalled = hup.is_set()
            hup.clear()
            if signalled or keys.changed():
                await keys.reload_off_loop()
    finally:
        if hooked:
            loop.remove_signal_handler(signal.SIGHUP)
