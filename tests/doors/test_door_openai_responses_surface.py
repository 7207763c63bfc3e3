"""The Responses door's remaining surface, with the official `openai` SDK over loopback against the simulator:
`parallel_tool_calls: false` as each vendor takes it, reasoning tokens in `output_tokens_details`,
`GET /v1/responses/{id}/input_items` (list shape and pagination), and a bad-input matrix in which every request
field's wrong type is a 4xx in OpenAI's error shape, never a 500."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseItem
from pydantic import TypeAdapter

from app.doors.openai_responses.request import FIELDS
from tests.conftest import marker
from tests.doors.test_door_openai_responses import ENCRYPTED, KEY, TOOLS, record, request_id_of
from tests.doors.test_door_openai_responses_state import KEY as STATE_KEY
from tests.doors.test_door_openai_responses_state import KEYS, OTHER_KEY, client_of, results_for

VENDORS = ["anthropic", "openai", "google"]
RESPONSE_ITEM = TypeAdapter(ResponseItem)


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"surface:{KEY}")


@pytest.fixture(scope="module")
def client(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)


# ---------------------------------------------------------------------------------------------- parallel_tool_calls


# What each vendor receives for `parallel_tool_calls: false` (Gemini has no such switch: nothing).
SERIAL = {
    "anthropic": lambda body: body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True},
    "openai": lambda body: body["parallel_tool_calls"] is False,
    "google": lambda body: "parallel" not in json.dumps(body).lower(),
    "compat": lambda body: body["parallel_tool_calls"] is False,
}


@pytest.mark.parametrize("vendor", [*VENDORS, "compat"])
def test_parallel_tool_calls_false_reaches_each_vendor_as_its_own_switch_and_true_sends_nothing(gw, client, vendor):
    m = marker()
    client.responses.create(model=f"{vendor}/tools", input=m, tools=TOOLS, parallel_tool_calls=False)
    assert SERIAL[vendor](gw.sim.seen(m)[-1]["body"])
    m = marker()
    client.responses.create(model=f"{vendor}/tools", input=m, tools=TOOLS, parallel_tool_calls=True)
    sent = gw.sim.seen(m)[-1]["body"]
    assert "parallel_tool_calls" not in sent and "disable_parallel_tool_use" not in json.dumps(sent)


def test_parallel_tool_calls_false_rides_along_a_forced_tool_on_anthropic_and_is_absent_with_none(gw, client):
    m = marker()
    client.responses.create(model="anthropic/tools", input=m, tools=TOOLS, parallel_tool_calls=False,
                            tool_choice={"type": "function", "name": "get_time"})  # fmt: skip
    assert gw.sim.seen(m)[-1]["body"]["tool_choice"] == {
        "type": "tool",
        "name": "get_time",
        "disable_parallel_tool_use": True,
    }
    m = marker()
    client.responses.create(model="anthropic/text", input=m, tools=TOOLS, parallel_tool_calls=False, tool_choice="none")
    assert gw.sim.seen(m)[-1]["body"]["tool_choice"] == {"type": "none"}  # Anthropic's none takes no such flag


# ---------------------------------------------------------------------------------------------- reasoning tokens


@pytest.mark.parametrize("vendor", VENDORS)
def test_reasoning_tokens_are_counted_where_the_vendor_counts_them_apart(gw, client, vendor):
    response = client.responses.create(model=f"{vendor}/thinking", input=marker(), reasoning={"effort": "low"})
    usage = response.usage
    unified = record(gw, request_id_of(response.id))["usage"]
    if vendor == "anthropic":  # Anthropic's usage has no separate count of thinking tokens
        assert usage.output_tokens_details.reasoning_tokens == 0 and "reasoning" not in unified
    else:
        assert 0 < usage.output_tokens_details.reasoning_tokens == unified["reasoning"] <= usage.output_tokens
        assert (
            unified["totalTokens"]
            == unified["input"] + unified["output"] + unified["cacheRead"] + unified["cacheWrite"]
        )
    with client.responses.stream(model=f"{vendor}/thinking", input=marker(), reasoning={"effort": "low"}) as stream:
        list(stream)
        streamed = stream.get_final_response().usage
    assert streamed.output_tokens_details.reasoning_tokens == usage.output_tokens_details.reasoning_tokens


# ---------------------------------------------------------------------------------------------- input_items


def _conversation(client: openai.OpenAI, vendor: str, m: str) -> tuple[Any, Any]:
    """A tool loop over two stored responses: the second continues the first with the tool results."""
    first = client.responses.create(
        model=f"{vendor}/tools", tools=TOOLS, include=ENCRYPTED,
        input=[{"role": "developer", "content": "You are terse."}, {"role": "user", "content": f"weather? {m}"}],
    )  # fmt: skip
    calls = [item for item in first.output if item.type == "function_call"]
    second = client.responses.create(
        model=f"{vendor}/text", previous_response_id=first.id, input=results_for(calls, m), tools=TOOLS
    )
    return first, second


@pytest.mark.parametrize("vendor", VENDORS)
def test_input_items_list_the_conversation_a_response_answered_in_the_sdks_shapes(ledger_gateway, vendor):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    first, second = _conversation(client, vendor, m)
    # The first response's input: the two messages it was sent, newest first by default.
    listed = client.responses.input_items.list(first.id)
    assert [(i.type, i.role) for i in listed.data] == [("message", "user"), ("message", "developer")]
    assert listed.data[0].content[0].text == f"weather? {m}" and listed.has_more is False
    assert (listed.first_id, listed.last_id) == (listed.data[0].id, listed.data[-1].id)
    # The second's: the conversation it continued (the first's input and output), then its tool results.
    items = list(client.responses.input_items.list(second.id, order="asc"))
    assert [i.type for i in items] == ["message", "message", *[o.type for o in first.output], "function_call_output", "function_call_output"]  # fmt: skip
    assert [i.id for i in items[2 : 2 + len(first.output)]] == [o.id for o in first.output]
    assert {i.call_id for i in items if i.type == "function_call_output"} == {
        o.call_id for o in first.output if o.type == "function_call"
    }
    raw = gw.http.get(f"/v1/responses/{second.id}/input_items", params={"order": "asc", "limit": 100},
                      headers={"Authorization": f"Bearer {STATE_KEY}"}).json()  # fmt: skip
    for item in raw["data"]:
        RESPONSE_ITEM.validate_python(item)  # every item in the SDK's own shape (ids, statuses, parts)
    assert len({item["id"] for item in raw["data"]}) == len(raw["data"])  # ids unique, also those the client never gave
    again = gw.http.get(
        f"/v1/responses/{second.id}/input_items",
        params={"order": "asc"},
        headers={"Authorization": f"Bearer {STATE_KEY}"},
    )
    assert again.json()["data"] == raw["data"][:20]  # the same ids on every listing


def test_input_items_pages_with_after_before_and_limit_as_the_sdk_pages(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    _, second = _conversation(client, "openai", m)
    whole = client.responses.input_items.list(second.id, order="asc", limit=100).data
    assert len(whole) >= 5
    # The SDK's cursor page follows `has_more` and `after` (the last id) to the end.
    paged = list(client.responses.input_items.list(second.id, order="asc", limit=2))
    assert [i.id for i in paged] == [i.id for i in whole]
    first_page = client.responses.input_items.list(second.id, order="asc", limit=2)
    assert first_page.has_more is True and len(first_page.data) == 2
    newest = client.responses.input_items.list(second.id, limit=1)
    assert newest.data[0].id == whole[-1].id and newest.has_more is True
    headers = {"Authorization": f"Bearer {STATE_KEY}"}
    before = gw.http.get(f"/v1/responses/{second.id}/input_items",
                         params={"order": "asc", "before": whole[3].id, "limit": 2}, headers=headers).json()  # fmt: skip
    assert [i["id"] for i in before["data"]] == [whole[1].id, whole[2].id] and before["has_more"] is True
    last = gw.http.get(
        f"/v1/responses/{second.id}/input_items", params={"order": "asc", "after": whole[-1].id}, headers=headers
    ).json()
    assert last == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


def test_input_items_show_reasoning_state_only_when_included_and_only_to_the_key_that_stored_it(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    first = client.responses.create(model="anthropic/thinking", input=m)
    second = client.responses.create(model="anthropic/text", previous_response_id=first.id, input=f"{m}-2")
    plain = [i for i in client.responses.input_items.list(second.id) if i.type == "reasoning"]
    assert len(plain) == 1 and plain[0].encrypted_content is None and plain[0].summary
    shown = [i for i in client.responses.input_items.list(second.id, include=ENCRYPTED) if i.type == "reasoning"]
    assert shown[0].encrypted_content.startswith("gw1.")
    with pytest.raises(openai.NotFoundError) as raised:
        client_of(gw, OTHER_KEY).responses.input_items.list(second.id)
    assert raised.value.body["code"] == "not_found"


@pytest.mark.parametrize(("params", "param"), [
    ({"limit": "0"}, "limit"), ({"limit": "101"}, "limit"), ({"limit": "many"}, "limit"), ({"order": "up"}, "order"),
    ({"after": "msg_nowhere"}, "after"), ({"before": "msg_nowhere"}, "before"), ({"page": "2"}, "page"),
])  # fmt: skip
def test_bad_input_items_parameters_are_400_in_openai_shape(ledger_gateway, params, param):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    stored = client_of(gw).responses.create(model="google/text", input=marker())
    response = gw.http.get(
        f"/v1/responses/{stored.id}/input_items", params=params, headers={"Authorization": f"Bearer {STATE_KEY}"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param and response.json()["error"]["type"] == "invalid_request_error"


# ---------------------------------------------------------------------------------------------- bad input matrix

# Values of every JSON type but the ones each field takes (`ignored` fields are checked too: a wrong type is a
# client bug the answer would hide). Fields that take anything non-null at all (refused ones) get every type.
_ALL: list[Any] = [7, 1.5, "x", True, [1], {"a": 1}]
TAKES: dict[str, tuple[type, ...]] = {
    "model": (str,), "input": (str, list), "instructions": (str,), "tools": (list,), "tool_choice": (str, dict),
    "parallel_tool_calls": (bool,), "max_output_tokens": (int,), "reasoning": (dict,), "text": (dict,),
    "temperature": (int, float), "top_p": (int, float), "metadata": (dict,), "prompt_cache_key": (str,),
    "include": (list,), "stream": (bool,), "stream_options": (dict,), "user": (str,), "safety_identifier": (str,),
    "store": (bool,), "previous_response_id": (str,), "service_tier": (str,), "client_metadata": (dict,),
    "truncation": (str,), "prompt_cache_retention": (str,), "max_tool_calls": (int,), "top_logprobs": (int,),
    "background": (bool,), "conversation": (), "prompt": (), "context_management": (),
}  # fmt: skip


def _wrong(field: str) -> list[Any]:
    takes = TAKES[field]
    return [v for v in _ALL if not (isinstance(v, takes) and not (isinstance(v, bool) and bool not in takes))]


def test_the_matrix_covers_every_request_field():
    assert set(TAKES) == set(FIELDS)


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_fields_wrong_type_is_a_400_in_openai_shape_naming_it_never_an_upstream_call(gw, field):
    for value in _wrong(field):
        m = marker()
        body = {"model": "anthropic/text", "input": m, field: value}
        response = gw.http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert response.status_code == 400, (field, value, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
        assert error["param"].split(".")[0] == field, (field, value, error)
        assert gw.sim.seen(m) == []


ITEM_MATRIX = [
    # (input items, param): unknown item types, a function_call_output whose call_id matches no call, wrong types.
    ([{"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": []}], "input.0.type"),
    ([{"type": "computer_call", "call_id": "c", "action": {"type": "click"}}], "input.0.type"),
    ([{"type": 7, "role": "user", "content": "x"}], "input.0.type"),
    ([{"type": "function_call_output", "call_id": "call_none", "output": "r"}], "input.0.call_id"),
    ([{"type": "function_call_output", "call_id": 7, "output": "r"}], "input.0.call_id"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}], "input.0.arguments"),
    ([{"type": "function_call", "call_id": "c", "name": 7, "arguments": "{}"}], "input.0.name"),
    ([{"type": "reasoning", "summary": [{"type": "summary_text", "text": 7}]}], "input.0.summary.0.text"),
    ([{"type": "reasoning", "summary": [], "encrypted_content": 7}], "input.0.encrypted_content"),
    ([{"type": "item_reference", "id": 7}], "input.0.id"),
    ([{"role": "user", "content": [{"type": "input_text", "text": 7}]}], "input.0.content.0.text"),
    ([{"role": "assistant", "content": [{"type": "output_text", "text": ["x"]}]}], "input.0.content.0.text"),
    (["just a string"], "input.0"),
]


@pytest.mark.parametrize(("items", "param"), ITEM_MATRIX, ids=[p + ":" + json.dumps(i)[:40] for i, p in ITEM_MATRIX])
def test_bad_input_items_are_400_naming_the_item_field(gw, items, param):
    m = marker()
    body = {"model": "openai/text", "input": [*items, {"role": "user", "content": m}]}
    response = gw.http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param and gw.sim.seen(m) == []


def test_an_expired_previous_response_id_is_a_404_as_is_another_keys(ledger_gateway):
    keeping = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    brief = ledger_gateway(api_keys=KEYS, throttle_ms=0, responses_retention_days=1 / 86_400_000)  # 1 ms
    kept = client_of(keeping).responses.create(model="anthropic/text", input=marker())
    for gw, key in ((brief, STATE_KEY), (keeping, OTHER_KEY)):
        with pytest.raises(openai.NotFoundError) as raised:
            client_of(gw, key).responses.create(model="anthropic/text", input=marker(), previous_response_id=kept.id)
        assert (
            raised.value.body["code"] == "previous_response_not_found"
            and raised.value.body["param"] == "previous_response_id"
        )
