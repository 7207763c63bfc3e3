"""A provider is built from a typed, frozen `ProviderConfig`, and every adapter closes with `aclose`."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from app.contract.catalog_entries import Cloud
from app.providers.base import Placement, Provider
from app.providers.clouds.registry import CLOUDS
from app.providers.config import ProviderConfig
from app.providers.registry import ADAPTERS
from app.providers.transport import TransportSettings


def test_the_config_is_frozen_and_keyword_only():
    config = ProviderConfig(name="p", api_key="secret", base_url="http://127.0.0.1:9")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.name = "q"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ProviderConfig("p", "secret")  # type: ignore[misc]
    assert "secret" not in repr(config)
    assert config.transport == TransportSettings() and dict(config.compat) == {}


@pytest.mark.parametrize("api", sorted(ADAPTERS))
async def test_each_adapter_is_built_from_a_config(api):
    transport = TransportSettings(connect_timeout=3.0, max_event_bytes=1024)
    config = ProviderConfig(name="p", api_key="k", base_url="http://127.0.0.1:9/v1/", transport=transport)
    adapter = ADAPTERS[api](config)
    try:
        assert adapter.name == "p" and adapter.api == api and adapter.placement is None  # at the api's maker
        assert adapter.base_url.startswith("http://127.0.0.1:9/v1")
        assert list(inspect.signature(type(adapter).__init__).parameters) == ["self", "config"]
    finally:
        await adapter.aclose()


@pytest.mark.parametrize(("cloud", "api"), [(cloud, api) for cloud in CLOUDS for api in sorted(CLOUDS[cloud].apis)])
async def test_each_cloud_builds_an_adapter_of_each_api_it_runs_that_declares_its_placement(cloud, api):
    descriptor = CLOUDS[cloud]
    on_cloud = Cloud(cloud, region="region-1", project="project-1", auth=descriptor.auth[0])
    config = ProviderConfig(name="p", api_key="k", base_url="https://127.0.0.1:9", cloud=on_cloud)
    adapter = descriptor.adapters[api](config)
    try:
        assert adapter.name == "p" and adapter.api == api
        assert adapter.placement == Placement(cloud, "region-1")
    finally:
        await adapter.aclose()


async def test_a_keyless_completions_server_gets_a_stand_in_key():
    adapter = ADAPTERS["openai-completions"](ProviderConfig(name="local", base_url="http://127.0.0.1:9/v1"))
    try:
        assert adapter.client.api_key == "no-key"
    finally:
        await adapter.aclose()


def test_aclose_is_part_of_the_provider_protocol():
    assert "aclose" in Provider.__dict__ and inspect.iscoroutinefunction(Provider.aclose)
    for adapter in ADAPTERS.values():
        assert inspect.iscoroutinefunction(adapter.load().aclose)
