"""What the gateway knows of a cloud: one `CloudDescriptor` per cloud (`CLOUD` of each package beside this
module, listed in `app.providers.clouds.registry.CLOUDS`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:  # at run time nothing: the catalog imports this module
    from app.contract.catalog_entries import Cloud
    from app.providers.lazy import Adapter


@dataclass(frozen=True, kw_only=True, slots=True)
class Demo:
    """A cloud's part of demo mode (`make run`, `app.catalog.demo_clouds`): entries the built-in simulator serves,
    with test credentials made for this process only."""

    # The simulator's URL -> the cloud's catalog entries: `{"providers": [...], "models": [...]}`.
    entries: Callable[[str], dict[str, list[dict[str, Any]]]]
    # (the simulator's URL, a folder of this process) -> nothing: puts the test credentials where the cloud's
    # standard chain reads first (this process's environment), as a real deployment's would be.
    credentials: Callable[[str, Path], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class CloudDescriptor:
    """One cloud: what a catalog entry on it may say, how its providers are built and what start-up says of them."""

    name: str  # the catalog's `cloud.kind`, and the `cloud` of records, log lines and metrics
    # Each api the cloud runs -> that api's adapter on the cloud (`app.providers.lazy.Adapter`: named, imported with
    # the cloud's SDK when a provider on the cloud is first needed).
    adapters: Mapping[str, Adapter]
    auth: tuple[str, ...]  # the catalog's `cloud.auth` values; the first is the default
    required: Mapping[str, str]  # `cloud` fields an entry must give -> an example value (for the catalog's error)
    chain: str  # where credentials come from when the entry names no key (start-up lines)
    # None: the SDK knows the cloud's URL. Else the cloud has no default URL and a provider is served only with a
    # base URL (catalog `baseUrl` or `GATEWAY_<NAME>_BASE_URL`): what it is ("the resource endpoint").
    endpoint: str | None = None
    demo: Demo

    @property
    def apis(self) -> frozenset[str]:
        """The apis the cloud runs (an entry's `api` must be one)."""
        return frozenset(self.adapters)

    def describe(self, cloud: Cloud) -> str:
        """For start-up lines: `on vertex (region global, project p)`, with the auth mode where the cloud has more
        than one (`auth entra`). Never a credential."""
        parts = [f"region {cloud.region}" if cloud.region else "region unset"]
        if cloud.project:
            parts.append(f"project {cloud.project}")
        if cloud.api_version:
            parts.append(f"api-version {cloud.api_version}")
        if len(self.auth) > 1:
            parts.append(f"auth {cloud.auth}")
        return f"on {self.name} ({', '.join(parts)})"
