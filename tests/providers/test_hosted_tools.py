"""Hosted tools (a client's `web_search`): the vendor's own search where the catalog allows it, else dropped and
named in `X-Gateway-Dropped-Tools`, never refused (docs/adapters/web-search.md).

Through the Responses door with the official `openai` SDK over loopback HTTP, against the gateway in front of
the simulator, on each vendor: mapped when the catalog allows it (Anthropic `web_search_20250305` with the
catalog's `max_uses`, OpenAI `web_search`, Gemini `google_search`), dropped and named when it does not, a
cached-only search (Codex's `external_web_access: false`) served only by OpenAI, and the header naming what the
provider that served did (a fallback after a failed first entry). Then the decision and the catalog as units.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from app.catalog import Catalog, CatalogError
from app.contract.catalog_entries import HostedTools, ModelInfo, Pricing
from app.contract.messages import Context, UserMessage
from app.contract.request import HostedToolsOption, StreamOptions, WebSearch
from app.providers import hosted
from app.providers.anthropic.request import build_request as anthropic_request
from app.providers.google.request import build_request as google_request
from app.providers.openai_completions.compat import Compat
from app.providers.openai_completions.request import build_request as completions_request
from app.providers.openai_responses.request import build_request as responses_request
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-hosted-0001"
HERE = Path(__file__).parents[1]
# The models `web-search` (the simulator's scenario) of each vendor allow the vendor's search; Anthropic's with a
# bound on searches per turn. Every other model keeps the default: off.
ALLOWED = [
    {"provider": "anthropic", "id": "web-search", "hostedTools": {"webSearch": {"maxUses": 3}}},
    {"provider": "openai", "id": "web-search", "hostedTools": {"webSearch": True}},
    {"provider": "google", "id": "web-search", "hostedTools": {"webSearch": True}},
]
ROUTES = [{"name": "search-after-failure", "model": "anthropic/http-500", "fallback": ["openai/web-search"]}]
WEB_SEARCH = {"type": "web_search"}
CACHED_ONLY = {"type": "web_search", "external_web_access": False}
FUNCTION = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def gw(gateway_factory: Any, tmp_path_factory: Any) -> Any:
    catalog = json.loads((HERE / "catalog.json").read_text())
    catalog["models"] += ALLOWED
    catalog["routes"] = ROUTES
    path = tmp_path_factory.mktemp("hosted") / "catalog.json"
    path.write_text(json.dumps(catalog))
    return gateway_factory(throttle_ms=0, api_keys=f"hosted:{KEY}", catalog=str(path), retries=0)


@pytest.fixture(scope="module")
def client(gw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)


def vendor_tools(gw: Any, m: str) -> list[dict[str, Any]]:
    """The tools the vendor was sent, in its own shape."""
    (seen,) = gw.sim.seen(m)
    body = seen["body"]
    if seen["vendor"] == "google":
        return [t for t in body.get("tools", [])]
    return body.get("tools", [])


def search_tools(gw: Any, m: str) -> list[dict[str, Any]]:
    """The vendor's own search tools among what it was sent (no function tools)."""
    return [
        t
        for t in vendor_tools(gw, m)
        if t.get("type") not in ("function", None) or "googleSearch" in t or "google_search" in t
    ]


EXPECTED = {
    "anthropic": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
    "openai": [{"type": "web_search"}],
    "google": [{"googleSearch": {}}],
}


@pytest.mark.parametrize("vendor", VENDORS)
def test_an_allowed_model_gets_its_vendors_own_search(vendor: str, gw: Any, client: openai.OpenAI) -> None:
    m = marker()
    raw = client.responses.with_raw_response.create(model=f"{vendor}/web-search", input=m, tools=[WEB_SEARCH, FUNCTION])
    assert raw.http_response.status_code == 200
    assert "x-gateway-dropped-tools" not in raw.headers
    response = raw.parse()
    assert response.status == "completed"
    # The vendor searched (its search blocks, item or grounding are not client content) and answered.
    assert response.output_text.endswith("It is sunny today.")
    assert search_tools(gw, m) == EXPECTED[vendor]


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_model_the_catalog_does_not_allow_is_sent_without_it_and_the_header_says_so(
    vendor: str, gw: Any, client: openai.OpenAI
) -> None:
    m = marker()
    raw = client.responses.with_raw_response.create(model=f"{vendor}/text", input=m, tools=[WEB_SEARCH, FUNCTION])
    assert raw.http_response.status_code == 200
    assert raw.headers["x-gateway-dropped-tools"] == "web_search"
    assert raw.parse().status == "completed"
    assert search_tools(gw, m) == []
    assert len(vendor_tools(gw, m)) == 1  # the function tool still went


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_cached_only_search_is_openais_alone(vendor: str, gw: Any, client: openai.OpenAI) -> None:
    m = marker()
    raw = client.responses.with_raw_response.create(model=f"{vendor}/web-search", input=m, tools=[CACHED_ONLY])
    assert raw.http_response.status_code == 200
    if vendor == "openai":
        assert "x-gateway-dropped-tools" not in raw.headers
        assert search_tools(gw, m) == [{"type": "web_search", "external_web_access": False}]
    else:  # a live search would change what the client asked for: dropped, named, never refused
        assert raw.headers["x-gateway-dropped-tools"] == "web_search"
        assert search_tools(gw, m) == []
    assert raw.parse().status == "completed"


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_stream_names_what_was_dropped_too(vendor: str, gw: Any) -> None:
    m = marker()
    body = {"model": f"{vendor}/text", "input": m, "tools": [WEB_SEARCH, {"type": "file_search"}], "stream": True}
    response = gw.http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200
    assert response.headers["x-gateway-dropped-tools"] == "file_search, web_search"  # the door's own, the turn's
    assert "event: response.completed" in response.text


def test_the_header_names_what_the_provider_that_served_dropped(gw: Any, client: openai.OpenAI) -> None:
    """The route's first entry (Anthropic, not allowed) fails before any content; OpenAI, allowed, serves: its
    search ran, nothing was dropped."""
    m = marker()
    raw = client.responses.with_raw_response.create(model="search-after-failure", input=m, tools=[WEB_SEARCH])
    assert raw.http_response.status_code == 200
    assert "x-gateway-dropped-tools" not in raw.headers
    assert raw.parse().model == "openai/web-search"
    tried = gw.sim.seen(m)
    assert [t["vendor"] for t in tried] == ["anthropic", "openai"]
    assert "tools" not in tried[0]["body"]  # the first entry was sent without it
    assert tried[1]["body"]["tools"] == [{"type": "web_search"}]


def test_the_model_list_shows_the_setting(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list()}
    assert models["anthropic/web-search"].model_extra["hostedTools"] == {"webSearch": {"maxUses": 3}}
    assert models["openai/web-search"].model_extra["hostedTools"] == {"webSearch": True}
    assert "hostedTools" not in models["anthropic/text"].model_extra  # off: not shown


def test_a_request_without_hosted_tools_has_no_header(client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.create(model="anthropic/web-search", input=marker(), tools=[FUNCTION])
    assert "x-gateway-dropped-tools" not in raw.headers


def test_anthropic_pausing_its_search_loop_is_an_incomplete_answer(client: openai.OpenAI) -> None:
    """`pause_turn`: the vendor stopped its server-tool loop before the answer was done; never `completed`."""
    response = client.responses.create(model="anthropic/web-search-paused", input=marker(), tools=[WEB_SEARCH])
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"


def test_the_unified_door_takes_hosted_tools_and_names_what_was_dropped(gw: Any) -> None:
    m = marker()
    body = {"model": "google/text", "context": {"messages": [{"role": "user", "content": m}]},
            "options": {"hostedTools": {"webSearch": {}}}}  # fmt: skip
    response = gw.http.post("/v1/stream", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200 and response.headers["x-gateway-dropped-tools"] == "web_search"
    allowed = {**body, "model": "google/web-search"}
    response = gw.http.post("/v1/complete", json=allowed, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200 and "x-gateway-dropped-tools" not in response.headers


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_vendors_search_streams_as_a_web_search_call_item(vendor: str, client: openai.OpenAI) -> None:
    """As OpenAI streams it: the item added, in_progress, searching, completed, the item done with its action;
    every event numbered in order. The sources come when `include` asks for them."""
    stream = client.responses.create(model=f"{vendor}/web-search", input=marker(), tools=[WEB_SEARCH], stream=True,
                                     include=["web_search_call.action.sources"])  # fmt: skip
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    search = [
        e
        for e in events
        if "web_search_call" in e.type or getattr(getattr(e, "item", None), "type", "") == "web_search_call"
    ]
    assert [e.type for e in search] == [
        "response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching",
        "response.web_search_call.completed", "response.output_item.done",
    ]  # fmt: skip
    index = search[0].output_index
    assert all(e.output_index == index for e in search) and search[1].item_id == search[0].item.id
    item = search[-1].item
    assert item.status == "completed" and item.action.type == "search"
    assert item.action.query == "gateway simulator weather"
    assert [s.url for s in item.action.sources] == ["https://example.com/weather", "https://example.org/forecast"]
    final = events[-1].response
    assert final.status == "completed"
    assert [o.type for o in final.output if o.type == "web_search_call"] == ["web_search_call"]
    assert final.output_text.endswith("It is sunny today.")


def test_without_include_the_search_has_no_sources_and_the_client_sends_it_back(client: openai.OpenAI) -> None:
    """A non-streaming answer lists the search; the client may send its output back as input (Codex does)."""
    first = client.responses.create(model="anthropic/web-search", input=marker(), tools=[WEB_SEARCH], store=False)
    (search,) = [o for o in first.output if o.type == "web_search_call"]
    assert search.action.query == "gateway simulator weather" and not getattr(search.action, "sources", None)
    m = marker()
    items = [o.model_dump(exclude_none=True) for o in first.output]
    again = client.responses.create(model="anthropic/text", input=[*items, {"role": "user", "content": m}], store=False)
    assert again.status == "completed"


def test_clients_that_did_not_ask_for_hosted_tools_see_no_search(gw: Any) -> None:
    """The vendor's search blocks (a recorded Anthropic answer with a web search) reach nobody who did not ask."""
    body = {
        "model": "anthropic/replay-web-search-citations",
        "context": {"messages": [{"role": "user", "content": marker()}]},
    }
    result = gw.stream(body, headers={"Authorization": f"Bearer {KEY}"})
    assert not any(e["type"].startswith("websearch") for e in result.events)
    assert not any(b["type"] == "webSearch" for b in result.terminal["message"]["content"])


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_unified_stream_has_websearch_events_and_a_webSearch_block(vendor: str, gw: Any) -> None:
    body = {"model": f"{vendor}/web-search", "context": {"messages": [{"role": "user", "content": marker()}]},
            "options": {"hostedTools": {"webSearch": {}}}}  # fmt: skip
    result = gw.stream(body, headers={"Authorization": f"Bearer {KEY}"})
    searches = [e for e in result.events if e["type"].startswith("websearch")]
    assert [e["type"] for e in searches] == ["websearch_start", "websearch_end"]
    index = searches[0]["contentIndex"]
    block = result.terminal["message"]["content"][index]
    assert searches[1]["webSearch"] == block and block["type"] == "webSearch" and block["status"] == "completed"
    assert block["query"] == "gateway simulator weather"
    assert [s["url"] for s in block["sources"]] == ["https://example.com/weather", "https://example.org/forecast"]


# ------------------------------------------------------------------------------- every door's hosted tools

SERVER_TOOLS = [
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
]


def messages_client(gw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=KEY, max_retries=0, timeout=30)


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_messages_doors_server_tools_are_served_or_dropped_never_refused(vendor: str, gw: Any) -> None:
    """Anthropic's server tools (an agent sends `web_search_20250305` with every request): the web search is the
    vendor's own where the catalog allows it, the others are dropped and named."""
    client = messages_client(gw)
    m = marker()
    raw = client.messages.with_raw_response.create(
        model=f"{vendor}/web-search", max_tokens=100, messages=[{"role": "user", "content": m}], tools=SERVER_TOOLS
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-gateway-dropped-tools"] == "web_fetch_20250910"
    assert search_tools(gw, m) == EXPECTED[vendor]
    message = raw.parse()
    assert {b.type for b in message.content} == {"text"}  # the search is not client content here
    assert message.content[-1].text.endswith("It is sunny today.")
    m = marker()
    raw = client.messages.with_raw_response.create(
        model=f"{vendor}/text", max_tokens=100, messages=[{"role": "user", "content": m}], tools=SERVER_TOOLS
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-gateway-dropped-tools"] == "web_fetch_20250910, web_search"
    assert search_tools(gw, m) == [] and len(vendor_tools(gw, m)) == 1  # the custom tool still went


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_messages_doors_stream_with_a_search_keeps_its_block_indexes_contiguous(vendor: str, gw: Any) -> None:
    with messages_client(gw).messages.stream(
        model=f"{vendor}/web-search", max_tokens=100, messages=[{"role": "user", "content": marker()}],
        tools=SERVER_TOOLS,  # type: ignore[arg-type]
    ) as stream:  # fmt: skip
        indexes = [e.index for e in stream if e.type == "content_block_start"]
        final = stream.get_final_message()
    assert indexes == list(range(len(indexes))) == list(range(len(final.content)))
    assert final.content[-1].type == "text" and final.content[-1].text.endswith("It is sunny today.")


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_gemini_doors_built_in_tools_are_served_or_dropped_never_refused(vendor: str, gw: Any) -> None:
    m = marker()
    body = {
        "contents": [{"role": "user", "parts": [{"text": m}]}],
        "tools": [{"googleSearch": {}}, {"codeExecution": {}}],
    }
    response = gw.http.post(
        f"/v1beta/models/{vendor}/web-search:generateContent", json=body, headers={"x-goog-api-key": KEY}
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped-tools"] == "codeExecution"
    assert search_tools(gw, m) == EXPECTED[vendor]
    assert response.json()["candidates"][0]["content"]["parts"][-1]["text"].endswith("It is sunny today.")


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_chat_doors_web_search_options_are_served_or_dropped_never_refused(
    vendor: str, gw: Any, client: openai.OpenAI
) -> None:
    m = marker()
    raw = client.chat.completions.with_raw_response.create(
        model=f"{vendor}/web-search", messages=[{"role": "user", "content": m}], web_search_options={}
    )
    assert raw.http_response.status_code == 200
    assert "x-gateway-dropped-tools" not in raw.headers
    assert search_tools(gw, m) == EXPECTED[vendor]
    m = marker()
    raw = client.chat.completions.with_raw_response.create(
        model=f"{vendor}/text", messages=[{"role": "user", "content": m}], web_search_options={}
    )
    assert raw.http_response.status_code == 200 and raw.headers["x-gateway-dropped-tools"] == "web_search"


# ------------------------------------------------------------------------------------------------- units

ASKED = StreamOptions(hosted_tools=HostedToolsOption(web_search=WebSearch()))
CACHED = StreamOptions(hosted_tools=HostedToolsOption(web_search=WebSearch(external_web_access=False)))
CONTEXT = Context(messages=[UserMessage(content="hi")])


def model(allowed: HostedTools | None) -> ModelInfo:
    return ModelInfo("p", "m", Pricing(), hosted_tools=allowed)


@pytest.mark.parametrize(
    "api", ["anthropic-messages", "openai-responses", "google-generative-ai", "openai-completions"]
)
def test_the_decision(api: str) -> None:
    allowed = model(HostedTools(web_search=True, web_search_max_uses=2))
    assert hosted.plan(api, allowed, StreamOptions()) == hosted.NOTHING  # nothing asked, nothing dropped
    assert hosted.plan(api, model(None), ASKED).dropped == ("web_search",)  # off by default
    assert hosted.plan(api, model(HostedTools(web_search=False)), ASKED).dropped == ("web_search",)
    served = hosted.plan(api, allowed, ASKED)
    if api == "openai-completions":  # no hosted search a general Chat Completions model takes
        assert served == hosted.HostedPlan(dropped=("web_search",))
    else:
        assert served == hosted.HostedPlan(web_search=hosted.WebSearchPlan(True, 2))
    cached = hosted.plan(api, allowed, CACHED)
    assert (cached.web_search is not None) is (api == "openai-responses")


def test_each_adapter_maps_an_allowed_search_and_only_then() -> None:
    allowed = ModelInfo("anthropic", "claude", Pricing(), hosted_tools=HostedTools(True, 5))
    assert anthropic_request(allowed, CONTEXT, ASKED)["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    ]
    assert "tools" not in anthropic_request(model(None), CONTEXT, ASKED)
    assert responses_request(allowed, CONTEXT, CACHED)["tools"] == [
        {"type": "web_search", "external_web_access": False}
    ]
    assert responses_request(allowed, CONTEXT, ASKED)["tools"] == [{"type": "web_search"}]
    assert google_request(allowed, CONTEXT, ASKED)["config"]["tools"] == [{"google_search": {}}]
    assert "tools" not in google_request(allowed, CONTEXT, CACHED)["config"]
    assert "tools" not in completions_request(allowed, CONTEXT, ASKED, Compat())


def test_the_catalog_setting_off_by_default_a_models_own_over_its_providers() -> None:
    catalog = Catalog()
    catalog.add({
        "providers": [{"name": "p", "api": "anthropic-messages", "hostedTools": {"webSearch": {"maxUses": 4}}}],
        "models": [{"provider": "p", "id": "own", "hostedTools": {"webSearch": False}}, {"provider": "p", "id": "listed"}],
    })  # fmt: skip
    assert catalog.served_model("p", "own").hosted_tools == HostedTools(web_search=False)
    assert catalog.served_model("p", "listed").hosted_tools == HostedTools(True, 4)
    assert catalog.served_model("p", "unlisted").hosted_tools == HostedTools(True, 4)
    assert Catalog.load().served_model("anthropic", "claude-sonnet-4-5").hosted_tools is None


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (
            {"webSearch": {"maxUses": 0}},
            "models[0] (anthropic/x): hostedTools.webSearch.maxUses must be a positive integer",
        ),
        ({"webSearch": {"max_uses": 2}}, "models[0] (anthropic/x): hostedTools.webSearch: unknown key 'max_uses'"),
        ({"fileSearch": True}, "models[0] (anthropic/x): hostedTools: unknown key 'fileSearch'"),
        ({"webSearch": "yes"}, "models[0] (anthropic/x): hostedTools.webSearch: expected an object"),
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_entry(entry: dict[str, Any], words: str) -> None:
    with pytest.raises(CatalogError, match=re.escape(words)):
        Catalog.load().add({"models": [{"provider": "anthropic", "id": "x", "hostedTools": entry}]})
