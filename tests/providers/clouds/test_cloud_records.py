"""What every cloud shares (CONTRACT §9a): records, the request log line, metrics and start-up lines name the
cloud and region a provider runs its api on, and never a credential."""

from __future__ import annotations

import logging
from app.catalog import Catalog
from app.contract.catalog_entries import Cloud
from app.contract.failures import Attempt
from app.ledger.base import build_record
from app.telemetry.logs import request_fields
from app.telemetry.metrics import Metrics
from app.providers.anthropic.events import AnthropicTranslator
from app.providers.base import Placement
from app.providers.registry import ProviderSetup
from app.server.startup_messages import log_providers
from app.settings import Settings
from tests.harness import ScriptedProvider, run_script

WIRE = [
    {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 3, "output_tokens": 0}},
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]


def scripted(placement: Placement | None) -> ScriptedProvider:
    provider = ScriptedProvider("vertex-claude", "anthropic-messages", AnthropicTranslator, WIRE)
    provider.placement = placement  # as a real adapter declares it from its catalog entry's `cloud`
    return provider


def test_a_turn_on_a_cloud_provider_records_its_cloud_and_region_in_the_record_attempts_and_log_line():
    events, job = run_script(scripted(Placement("vertex", "europe-west4")))
    assert events[-1]["type"] == "done"
    assert job.settled is not None
    record = build_record(job, settled=job.settled, retain_content=False)
    assert (record["provider"], record["cloud"], record["region"]) == ("vertex-claude", "vertex", "europe-west4")
    assert record["attempts"][0]["cloud"] == "vertex" and record["attempts"][0]["region"] == "europe-west4"
    fields = request_fields(job, job.settled)
    assert (fields["cloud"], fields["region"]) == ("vertex", "europe-west4")


def test_a_provider_at_the_api_maker_records_no_cloud():
    _, job = run_script(scripted(None))
    record = build_record(job, settled=job.settled, retain_content=False)
    assert record["cloud"] is None and record["region"] is None
    assert "cloud" not in record["attempts"][0]  # an attempt's cloud fields are there only on a cloud
    assert Attempt("a", "b", "c").record().keys() >= {"provider", "api", "model"}


def test_metrics_name_each_cloud_provider_with_its_cloud_and_region(tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text(
        '{"providers": [{"name": "azure-east", "api": "openai-responses", "keyEnv": "K", '
        '"cloud": {"kind": "azure", "region": "eastus"}}]}'
    )
    text = Metrics(Catalog.load(path)).exposition()[0].decode()
    assert 'gateway_provider_cloud_info{cloud="azure",provider="azure-east",region="eastus"} 1.0' in text
    assert 'provider="anthropic"' not in text.split("gateway_provider_cloud_info", 1)[1]  # not on a cloud


def test_start_up_lines_say_the_cloud_region_and_where_credentials_come_from(caplog):
    vertex = Cloud("vertex", region="global", project="acme-prod", auth="google")
    azure = Cloud("azure", region="eastus", api_version="2025-04-01-preview", auth="api-key")
    setups = [
        ProviderSetup("vertex-claude", "anthropic-messages", None, None, None, "SDK default", True, None, vertex),
        ProviderSetup(
            "azure-east",
            "openai-responses",
            "secret-azure-key",
            "AZURE_OPENAI_API_KEY",
            "https://east.openai.azure.com",
            "catalog",
            True,
            None,
            azure,
        ),
    ]
    with caplog.at_level(logging.INFO, logger="gateway.providers"):
        log_providers(setups, Settings(demo=False))
    lines = [r.getMessage() for r in caplog.records]
    vertex_line = next(line for line in lines if "vertex-claude" in line)
    azure_line = next(line for line in lines if "azure-east" in line)
    assert "on vertex (region global, project acme-prod)" in vertex_line
    assert "credentials from Google Application Default Credentials" in vertex_line
    assert "on azure (region eastus, api-version 2025-04-01-preview, auth api-key)" in azure_line
    assert "key from AZURE_OPENAI_API_KEY" in azure_line and "secret-azure-key" not in azure_line
    record = next(r for r in caplog.records if "vertex-claude" in r.getMessage())
    assert (record.cloud, record.region) == ("vertex", "global")
