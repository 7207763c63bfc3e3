"""Where a configured provider runs when its api runs on a cloud (CONTRACT §9a): what records, logs, metrics
and start-up lines name besides the provider. Adapters on a cloud keep their catalog entry's `Cloud` in
`config.cloud` (`app.providers.config.ProviderConfig`); any other provider (a test's scripted one) is on none."""

from __future__ import annotations

from typing import Any

from app.catalog import Cloud

# Where each cloud's credentials come from when the catalog entry names no key (start-up lines, docs/clouds.md).
CHAINS = {
    "bedrock": "the AWS credential chain",
    "vertex": "Google Application Default Credentials",
    "azure": "Microsoft Entra ID (azure-identity)",
}


def cloud_of(provider: Any) -> Cloud | None:
    """The `Cloud` a provider object runs on, None when the api's maker serves it."""
    return getattr(getattr(provider, "config", None), "cloud", None)


def placement(provider: Any) -> dict[str, str | None]:
    """`{cloud, region}` of a provider (`{"cloud": "vertex", "region": "global"}`); `{}` off a cloud."""
    cloud = cloud_of(provider)
    return {"cloud": cloud.kind, "region": cloud.region} if cloud is not None else {}


def describe(cloud: Cloud | None) -> str:
    """For start-up lines: `on vertex (region global, project p)`; "" off a cloud. Never a credential."""
    if cloud is None:
        return ""
    parts = [f"region {cloud.region}" if cloud.region else "region unset"]
    if cloud.project:
        parts.append(f"project {cloud.project}")
    if cloud.api_version:
        parts.append(f"api-version {cloud.api_version}")
    if cloud.kind == "azure":
        parts.append(f"auth {cloud.auth}")
    return f"on {cloud.kind} ({', '.join(parts)})"
