"""Model names: `<provider>/<model>`, catalog routes, aliases and bare ids, resolved the same way for every
door and every fallback entry (app/catalog/resolve.py); catalog validation at start-up; `GET /v1/models`."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from app.catalog import BUILTIN, Catalog, CatalogError
from app.contract.catalog import ModelList
from app.contract.refusals import AmbiguousModel, RequestRejected, UnknownModel
from app.catalog.resolve import ModelResolver
from tests.conftest import PROVIDER_KEYS, marker, settings_for, turn
from tests.ledger.test_ledger import record_of

ROUTES = {
    "providers": [{"name": "anthropic-eu", "api": "anthropic-messages", "keyEnv": "ANTHROPIC_EU_TEST_KEY"}],
    "models": [
        {"provider": "anthropic", "id": "text", "maxTokens": 8192, "aliases": ["text-latest"]},
        {"provider": "openai", "id": "only-openai"},
        {"provider": "anthropic", "id": "shared-id"},
        {"provider": "google", "id": "shared-id"},
        {"provider": "anthropic-eu", "id": "eu-only"},
    ],
    "routes": [
        {"name": "fast", "model": "google/text", "fallback": ["openai/text"]},
        {"name": "flaky", "model": "anthropic/http-529", "fallback": ["openai/text"], "description": "test"},
        {"name": "eu-first", "model": "anthropic-eu/eu-only", "fallback": ["anthropic/text"]},
    ],
}


def write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    return Catalog.load(write(tmp_path, ROUTES))


def names(served) -> list[str]:
    return [f"{s.provider}/{s.model.id}" for s in served]


# --- the resolver on its own --------------------------------------------------------------------------------


def test_provider_slash_model_with_slashes_and_aliases(catalog):
    resolver = ModelResolver(catalog, ["anthropic", "openai", "groq"])
    assert names(resolver.resolve("anthropic/text-latest")) == ["anthropic/text"]  # alias → the listed id
    assert names(resolver.resolve("groq/openai/gpt-oss-120b")) == ["groq/openai/gpt-oss-120b"]
    assert names(resolver.resolve("openai/gpt-oss-120b")) == ["openai/gpt-oss-120b"]  # `openai` is configured
    unlisted = resolver.resolve("anthropic/not-in-the-catalog")[0]
    assert unlisted.model.id == "not-in-the-catalog" and unlisted.model.pricing.input == 0


def test_a_clients_model_id_that_cannot_be_one_path_segment_is_refused_on_every_api_and_cloud(tmp_path):
    """Issue 39 item 5: what would end or change a vendor URL's path is refused (400 naming the model) before
    any call; `/` and `:` only where the id is a path segment (Gemini, Vertex AI, Azure), not where it travels
    in the body (Chat Completions' `org/model`) or Bedrock's SDK encodes it (`…-v1:0`). The catalog's own ids
    are the operator's and are not checked."""
    clouds = [
        {"name": "vertex-claude", "api": "anthropic-messages", "cloud": {"kind": "vertex", "project": "p", "region": "global"}},
        {"name": "bedrock-claude", "api": "anthropic-messages", "cloud": {"kind": "bedrock", "region": "us-east-1"}},
        {"name": "azure-east", "api": "openai-responses", "baseUrl": "https://east.example/openai/v1",
         "keyEnv": "AZ_KEY", "cloud": {"kind": "azure", "region": "eastus"}},
        {"name": "groq", "api": "openai-completions", "baseUrl": "https://groq.example/v1", "keyEnv": "GROQ_KEY"},
    ]  # fmt: skip
    catalog = Catalog.load(write(tmp_path, {"providers": clouds, "models": [{"provider": "google", "id": "a:b"}]}))
    names_ = ["anthropic", "openai", "google", *(c["name"] for c in clouds)]
    resolver = ModelResolver(catalog, names_)
    for name in ("google/gemini-x:countTokens", "google/x/y", "vertex-claude/claude:streamRawPredict",
                 "azure-east/prod/gpt", "google/gemini-x#", "anthropic/x?y", "openai/gpt%2e", "groq/../x",
                 "groq/a/./b", "openai/a\x00b", "anthropic/a b", "openai/a\\b"):  # fmt: skip
        with pytest.raises(RequestRejected) as refused:
            resolver.plan(name)
        assert refused.value.param == "model" and refused.value.message.startswith(f"model {name.partition('/')[2]!r}")
    for name in ("groq/openai/gpt-oss-120b", "bedrock-claude/anthropic.claude-v2:1", "vertex-claude/claude@2025",
                 "google/a:b", "openai/gpt-5.1"):  # fmt: skip
        assert names(resolver.plan(name)) == [name]
    with pytest.raises(RequestRejected) as refused:
        resolver.plan("anthropic/text", ["google/x#y"])
    assert refused.value.param == "fallback.0"


def test_routes_give_model_then_fallback_and_skip_unconfigured_providers(catalog):
    resolver = ModelResolver(catalog, ["google", "openai", "anthropic"])
    assert names(resolver.resolve("fast")) == ["google/text", "openai/text"]
    assert names(ModelResolver(catalog, ["openai"]).resolve("fast")) == ["openai/text"]
    with pytest.raises(UnknownModel, match="none of which is configured"):
        ModelResolver(catalog, ["anthropic"]).resolve("fast")


def test_plan_appends_the_requests_fallback_after_the_routes(catalog):
    resolver = ModelResolver(catalog, ["google", "openai", "anthropic"])
    plan = resolver.plan("fast", ["anthropic/text", "flaky"])
    assert names(plan) == ["google/text", "openai/text", "anthropic/text", "anthropic/http-529", "openai/text"]


def test_bare_ids_that_one_configured_provider_lists(catalog):
    resolver = ModelResolver(catalog, ["anthropic", "openai", "google", "together"])
    assert names(resolver.resolve("claude-sonnet-4-5")) == ["anthropic/claude-sonnet-4-5"]
    assert names(resolver.resolve("claude-sonnet-4-5-20250929")) == ["anthropic/claude-sonnet-4-5"]  # bare alias
    assert names(resolver.resolve("only-openai")) == ["openai/only-openai"]
    # an id with "/" whose first part is no provider, listed by one configured provider
    assert names(resolver.resolve("meta-llama/Llama-3.3-70B-Instruct-Turbo")) == [
        "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"
    ]
    # listed by a provider that is not configured here: the one configured provider that lists it serves
    assert names(ModelResolver(catalog, ["google"]).resolve("shared-id")) == ["google/shared-id"]


def test_ambiguous_bare_id_names_the_candidates(catalog):
    resolver = ModelResolver(catalog, ["anthropic", "google"])
    with pytest.raises(AmbiguousModel) as caught:
        resolver.plan("anthropic/text", ["shared-id"])
    assert "anthropic/shared-id" in caught.value.message and "google/shared-id" in caught.value.message
    assert caught.value.param == "fallback.0"


def test_unknown_names_say_why(catalog):
    resolver = ModelResolver(catalog, ["anthropic"])
    cases = {
        "no-such-model": "unknown model",
        "mystery/model-1": "unknown provider 'mystery'",
        "openai/gpt-5": "provider 'openai' is not configured",
        "eu-only": "unknown model",  # listed only by a provider that is not configured
    }
    for name, reason in cases.items():
        with pytest.raises(UnknownModel, match=reason) as caught:
            resolver.plan(name)
        assert caught.value.param == "model"


# --- catalog validation at start-up -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, complaint",
    [
        ({"provider": []}, "unknown key 'provider'"),
        (
            {"providers": [{"name": "x", "api": "anthropic-message"}]},
            r"providers\[0\] \(x\): api 'anthropic-message' has no adapter \(did you mean 'anthropic-messages'\? known: "
            "anthropic-messages, google-generative-ai, openai-completions, openai-responses",
        ),
        ({"providers": [{"name": "x", "api": "anthropic-messages", "baseURL": "http://x"}]}, "unknown key 'baseURL'"),
        ({"models": [{"provider": "anthropic", "id": "m", "context_window": 5}]}, "unknown key 'context_window'"),
        ({"models": [{"provider": "anthropic", "id": "m", "cost": {"inputs": 1}}]}, "unknown key 'inputs'"),
        ({"models": [{"provider": "nowhere", "id": "m"}]}, "unknown provider 'nowhere'"),
        ({"routes": [{"name": "r", "model": "anthropic/x", "fallbacks": []}]}, "unknown key 'fallbacks'"),
        ({"routes": [{"name": "r", "model": "antropic/claude-sonnet-4-5"}]}, "names unknown provider 'antropic'"),
        ({"routes": [{"name": "r", "model": "anthropic/x", "fallback": ["opnai/gpt-5"]}]}, "unknown provider 'opnai'"),
        ({"routes": [{"name": "r", "model": "claude-sonnet-4-5"}]}, "must be '<provider>/<model id>'"),
        ({"routes": [{"name": "a/b", "model": "anthropic/x"}]}, "no '/'"),
        ({"routes": [{"model": "anthropic/x"}]}, "KeyError"),
        (
            {"providers": [{"name": "b", "api": "anthropic-messages", "cloud": {"kind": "bedrock"}}]},
            "needs cloud.region",
        ),
        ({"providers": [{"name": "b", "api": "anthropic-messages", "cloud": {"kind": "aws"}}]}, "cloud kind 'aws'"),
        (
            {"providers": [{"name": "a", "api": "anthropic-messages", "cloud": {"kind": "azure"}}]},
            "does not run on azure",
        ),
        (
            {"providers": [{"name": "v", "api": "google-generative-ai", "cloud": {"kind": "vertex", "zone": "x"}}]},
            "unknown key 'zone'",
        ),
        (
            {"providers": [{"name": "a", "api": "openai-responses", "cloud": {"kind": "azure", "auth": "aad"}}]},
            "cloud auth 'aad'",
        ),
    ],
)
def test_catalog_mistakes_fail_at_start_up(tmp_path, data, complaint):
    path = write(tmp_path, data)
    with pytest.raises(CatalogError, match=complaint) as caught:
        Catalog.load(path)
    assert str(caught.value).startswith(f"catalog {path}: ")


def test_a_cloud_provider_entry_is_typed_with_its_auth_default(tmp_path):
    path = write(
        tmp_path,
        {
            "providers": [
                {
                    "name": "azure-east",
                    "api": "openai-responses",
                    "baseUrl": "https://east.example/openai/v1",
                    "keyEnv": "AZ_KEY",
                    "cloud": {"kind": "azure", "region": "eastus", "deployments": {"gpt-5": "prod-gpt5"}},
                },
                {
                    "name": "vertex-claude",
                    "api": "anthropic-messages",
                    "cloud": {"kind": "vertex", "project": "p", "region": "global"},
                },
            ]
        },
    )
    catalog = Catalog.load(path)
    azure, vertex = catalog.providers["azure-east"].cloud, catalog.providers["vertex-claude"].cloud
    assert (azure.kind, azure.auth, azure.upstream_model("gpt-5"), azure.upstream_model("gpt-4o")) == (
        "azure",
        "api-key",
        "prod-gpt5",
        "gpt-4o",
    )
    assert (vertex.kind, vertex.auth, vertex.project, vertex.region) == ("vertex", "google", "p", "global")
    assert catalog.providers["anthropic"].cloud is None


def test_an_azure_provider_without_its_endpoint_is_not_served_and_says_what_to_set(tmp_path, monkeypatch):
    from app.providers.registry import provider_setups
    from app.settings import Settings

    monkeypatch.setenv("AZ_TEST_KEY", "k")
    path = write(
        tmp_path,
        {
            "providers": [
                {
                    "name": "azure-west",
                    "api": "openai-completions",
                    "keyEnv": "AZ_TEST_KEY",
                    "cloud": {"kind": "azure"},
                },
                {
                    "name": "azure-east",
                    "api": "openai-completions",
                    "keyEnv": "AZ_TEST_KEY",
                    "baseUrl": "https://east.example",
                    "cloud": {"kind": "azure"},
                },
            ]
        },
    )
    setups = {s.name: s for s in provider_setups(Settings(), Catalog.load(path).providers)}
    assert not setups["azure-west"].served and "GATEWAY_AZURE_WEST_BASE_URL" in setups["azure-west"].missing
    assert setups["azure-east"].served


def test_gateway_refuses_to_start_on_a_bad_route(tmp_path, sim):
    from app.gateway import Gateway

    settings = settings_for(sim.url, catalog=write(tmp_path, {"routes": [{"name": "r", "model": "nobody/x"}]}))
    with pytest.raises(
        CatalogError, match=r"catalog .*catalog.json: route 'r': 'nobody/x' names unknown provider 'nobody'"
    ):
        Gateway(settings)


def test_builtin_catalog_routes_name_builtin_providers():
    catalog = Catalog.load()
    assert json.loads(BUILTIN.read_text())["routes"]
    for route in catalog.routes.values():
        assert all(ref.partition("/")[0] in ("anthropic", "openai", "google") for ref in route.entries)


# --- over loopback ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def routed(gateway_factory, sim, tmp_path_factory):
    """A gateway with the routes above and `anthropic-eu` (api anthropic-messages) on the simulator."""
    path = write(tmp_path_factory.mktemp("routes"), ROUTES)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_EU_TEST_KEY", PROVIDER_KEYS["anthropic"])
        return gateway_factory(catalog=path, base_urls={"anthropic-eu": f"{sim.url}/anthropic"})


def test_route_serves_with_its_model_and_the_record_keeps_the_name(routed):
    m = marker()
    result = routed.stream(turn("fast", m))
    assert result.status == 200, result.text
    start = result.events[0]
    assert (start["provider"], start["model"]) == ("google", "text")
    assert result.terminal["type"] == "done"
    record = record_of(routed, result.headers["x-request-id"])
    assert record["requestedModel"] == "fast" and record["fallback"] == []
    assert (record["provider"], record["model"]) == ("google", "text")


def test_route_fallback_then_the_requests_own(routed):
    m = marker()
    result = routed.stream(turn("flaky", m, fallback=["anthropic/text"]))
    start = result.events[0]
    assert (start["provider"], start["model"]) == ("openai", "text")
    record = record_of(routed, result.headers["x-request-id"])
    assert [a["model"] for a in record["attempts"]][-1] == "text"
    assert {a["provider"] for a in record["attempts"]} == {"anthropic", "openai"}
    assert record["requestedModel"] == "flaky" and record["fallback"] == ["anthropic/text"]


def test_bare_id_and_alias_over_loopback(routed):
    result = routed.stream(turn("only-openai"))
    assert (result.events[0]["provider"], result.events[0]["model"]) == ("openai", "only-openai")
    result = routed.stream(turn("anthropic/text-latest"))
    assert result.events[0]["model"] == "text"  # the listed id, not the alias
    result = routed.stream(turn("eu-only"))  # a catalog provider on a built-in api, by its bare id
    assert (result.events[0]["provider"], result.events[0]["api"]) == ("anthropic-eu", "anthropic-messages")


def test_ambiguous_and_unknown_names_are_refused_before_any_upstream_call(routed):
    m = marker()
    response = routed.http.post("/v1/stream", json=turn("shared-id", m))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (
        error["param"] == "model"
        and "anthropic/shared-id" in error["message"]
        and "google/shared-id" in error["message"]
    )
    response = routed.http.post("/v1/complete", json=turn("anthropic/text", m, fallback=["nothing-like-it"]))
    assert response.status_code == 404 and response.json()["error"]["param"] == "fallback.0"
    assert routed.sim.seen(m) == []


def test_pi_door_resolves_the_same_way(routed):
    body = {
        "model": {"provider": "anthropic", "id": "text-latest", "api": "anthropic-messages"},
        "context": {"messages": [{"role": "user", "content": marker()}]},
    }
    response = routed.http.post("/api/stream", json=body)
    assert response.status_code == 200 and '"model":"text"' in response.text


# --- GET /v1/models -----------------------------------------------------------------------------------------


def test_models_list_in_openais_shape_read_by_the_openai_sdk(routed):
    body = routed.http.get("/v1/models").json()
    assert body["object"] == "list"
    ModelList.model_validate(body)  # the shape the OpenAPI document declares
    by_id = {entry["id"]: entry for entry in body["data"]}
    text = by_id["anthropic/text"]
    assert text["object"] == "model" and text["owned_by"] == "anthropic" and isinstance(text["created"], int)
    assert text["api"] == "anthropic-messages" and text["maxTokens"] == 8192 and text["aliases"] == ["text-latest"]
    assert set(text["cost"]) == {"input", "output", "cacheRead", "cacheWrite"}
    fast = by_id["fast"]
    assert fast["owned_by"] == "gateway" and fast["route"] == {"model": "google/text", "fallback": ["openai/text"]}
    assert by_id["anthropic-eu/eu-only"]["owned_by"] == "anthropic-eu"
    assert "openrouter/openai/gpt-5-mini" not in by_id  # a provider without a key is not listed

    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="unused")
    models = list(client.models.list())
    assert {m.id for m in models} == set(by_id)
    listed = next(m for m in models if m.id == "fast")
    assert listed.owned_by == "gateway" and listed.object == "model" and listed.created == fast["created"]
    assert client.models.list().data[0].model_extra  # the catalog's fields are kept by the SDK


def test_a_route_fallback_that_cannot_honour_the_request_is_left_out(routed):
    """`flaky` is anthropic (failing) then openai; OpenAI's Responses API has no stop sequences, so with
    `stop` the plan is anthropic only: no call to openai, and the turn is not refused."""
    m = marker()
    result = routed.stream(turn("flaky", m, options={"stop": ["END"], "throttleMs": 0}))
    assert result.status == 200 and result.terminal["type"] == "error"
    assert {s["vendor"] for s in routed.sim.seen(m)} == {"anthropic"}
    record = record_of(routed, result.headers["x-request-id"])
    assert {a["provider"] for a in record["attempts"]} == {"anthropic"}


def test_the_first_choice_that_cannot_honour_the_request_refuses_it(routed):
    m = marker()
    response = routed.http.post(
        "/v1/stream", json=turn("openai/text", m, options={"stop": ["END"]}, fallback=["anthropic/text"])
    )
    assert response.status_code == 400 and response.json()["error"]["param"] == "options.stop"
    assert routed.sim.seen(m) == []


def test_key_policies_see_the_model_a_name_stands_for(gateway_factory, tmp_path):
    """A key allowed `anthropic/*` may use the bare id of an anthropic model, not of an openai one; a route
    is allowed by its own name."""
    from tests.policy.test_keys_policy import bearer, write_keys

    keys = tmp_path / "keys.json"
    write_keys(keys, team={"models": ["anthropic/*", "fast"]})
    gw = gateway_factory(catalog=write(tmp_path, ROUTES), keys_file=str(keys), api_keys="")
    ok = gw.stream(turn("text-latest"), headers=bearer("sk-team"))  # an alias → anthropic/text
    assert ok.status == 200 and ok.events[0]["provider"] == "anthropic"
    assert gw.stream(turn("fast"), headers=bearer("sk-team")).status == 200
    refused = gw.http.post(
        "/v1/stream", json=turn("anthropic/text", fallback=["only-openai"]), headers=bearer("sk-team")
    )
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["param"] == "fallback.0" and "openai/only-openai" in error["message"]


def test_a_message_naming_the_model_by_an_alias_is_the_same_model(routed):
    """Thinking signed by `text-latest` (an alias of anthropic/text, as a pi client names it) goes back signed."""
    m = marker()
    body = {
        "model": "anthropic/text",
        "context": {
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "provider": "anthropic",
                    "api": "anthropic-messages",
                    "model": "text-latest",
                    "content": [
                        {"type": "thinking", "thinking": "Think.", "thinkingSignature": "sig-1"},
                        {"type": "text", "text": "Hello."},
                    ],
                    "stopReason": "stop",
                },
                {"role": "user", "content": m},
            ]
        },
    }
    assert routed.stream(body).terminal["type"] == "done"
    assistant = routed.sim.seen(m)[0]["body"]["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Think.", "signature": "sig-1"}


def test_models_list_in_anthropics_shape_for_the_anthropic_sdk(routed):
    import anthropic

    client = anthropic.Anthropic(base_url=routed.url, api_key="unused")
    models = list(client.models.list())
    by_id = {m.id: m for m in models}
    openai_ids = {entry["id"] for entry in routed.http.get("/v1/models").json()["data"]}
    assert set(by_id) == openai_ids
    text = by_id["anthropic/text"]
    assert text.type == "model" and text.max_tokens == 8192 and text.created_at.year >= 2025
    assert text.display_name == "anthropic/text" and text.model_extra["api"] == "anthropic-messages"
    assert by_id["flaky"].display_name == "test"  # a route's description


def test_the_chat_completions_door_resolves_names_the_same_way(routed):
    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="unused")
    m = marker()
    completion = client.chat.completions.create(model="fast", messages=[{"role": "user", "content": m}])
    assert completion.model == "google/text"  # what served the route
    assert routed.sim.seen(m)[0]["vendor"] == "google"
    request_id = completion.id.removeprefix("chatcmpl-")
    record = record_of(routed, request_id)
    assert record["requestedModel"] == "fast" and record["door"] == "openai-chat"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="shared-id", messages=[{"role": "user", "content": "x"}])
    assert "anthropic/shared-id" in str(caught.value)


def test_python_m_app_stops_on_a_bad_catalog_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "GATEWAY_CATALOG": write(tmp_path, {"routes": [{"name": "r", "model": "nobody/x"}]}),
        "GATEWAY_PORT": "1",
        "GATEWAY_DATABASE_URL": f"sqlite:///{tmp_path}/gateway.db",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 3
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    [line] = [line for line in lines if "start-up failed" in line]
    assert "route 'r': 'nobody/x' names unknown provider 'nobody'" in line
    assert "Traceback" not in done.stdout + done.stderr
