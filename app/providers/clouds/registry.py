"""Every cloud, by its name (the catalog's `cloud.kind`). Adding a cloud is one package under
`app/providers/clouds/` and one entry here (docs/internals.md, Where a new thing goes)."""

from __future__ import annotations

from app.providers.clouds import azure, bedrock, vertex
from app.providers.clouds.base import CloudDescriptor

CLOUDS: dict[str, CloudDescriptor] = {cloud.name: cloud for cloud in (bedrock.CLOUD, vertex.CLOUD, azure.CLOUD)}
