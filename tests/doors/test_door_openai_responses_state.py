"""Conversation state of the OpenAI Responses door with the official `openai` SDK over loopback: `store` keeps a
response in the ledger's database (SQLite and PostgreSQL), `previous_response_id` and `item_reference` build on
it from any replica, `GET` and `DELETE /v1/responses/{id}` read and remove it — all scoped to the client key."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from app.ledger import open_ledger
from tests.conftest import marker
from tests.doors.test_door_openai_responses import SIGNATURE_ON_THE_WIRE

KEY = "sk-client-state-0001"
OTHER_KEY = "sk-client-state-0002"
KEYS = f"mine:{KEY},theirs:{OTHER_KEY}"
VENDORS = ["anthropic", "openai", "google"]
TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}},
]  # fmt: skip


def client_of(gw: Any, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=30)


def sent_to(gw: Any, text: str, vendor: str) -> str:
    """The last request body `vendor` received that holds `text`, as JSON text."""
    bodies = [entry["body"] for entry in gw.sim.seen(text) if entry["vendor"] == vendor]
    assert bodies, f"{vendor} never received {text!r}"
    return json.dumps(bodies[-1])


def results_for(calls: list[Any], m: str) -> list[dict[str, Any]]:
    outputs = {"get_weather": f"18C cloudy {m}-w", "get_time": f"14:05 {m}-t"}
    return [{"type": "function_call_output", "call_id": c.call_id, "output": outputs[c.name]} for c in calls]


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_tool_loop_by_previous_response_id_continues_on_another_replica_and_model(ledger_gateway, vendor):
    first_replica = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    second_replica = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    m = marker()
    history = [{"role": "developer", "content": "You are terse."}, {"role": "user", "content": f"weather? {m}"}]
    first = client_of(first_replica).responses.create(model=f"{vendor}/tools", input=history, tools=TOOLS)
    assert first.store is True  # the API's default when `store` is absent
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 2
    # Only the tool results and the id: the rest of the conversation comes from the store, on the other replica,
    # for another vendor (the conversation is handed off like any cross-provider history).
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    second = client_of(second_replica).responses.create(
        model=f"{other}/text", previous_response_id=first.id, input=results_for(calls, m), tools=TOOLS
    )
    assert second.status == "completed" and second.previous_response_id == first.id
    raw = sent_to(second_replica, f"{m}-w", other)
    assert f"weather? {m}" in raw and "You are terse." in raw and f"{m}-t" in raw and "get_time" in raw
    # A third turn continues the second, back on the first replica and the first vendor.
    third = client_of(first_replica).responses.create(
        model=f"{vendor}/text", previous_response_id=second.id, input=f"and now? {m}-3"
    )
    assert third.status == "completed"
    raw = sent_to(first_replica, f"{m}-3", vendor)
    assert f"weather? {m}" in raw and f"{m}-w" in raw and second.output_text in raw
    # Each replica serves what the other stored.
    fetched = client_of(second_replica).responses.retrieve(first.id)
    assert fetched.id == first.id and fetched.output == first.output and fetched.status == "completed"


def test_a_streamed_response_is_stored_and_continued_at_once(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    with client.responses.stream(model="openai/tools", input=f"weather? {m}", tools=TOOLS) as stream:
        list(stream)
        first = stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    second = client.responses.create(model="anthropic/text", previous_response_id=first.id, input=results_for(calls, m))
    assert second.status == "completed"
    assert f"weather? {m}" in sent_to(gw, f"{m}-w", "anthropic")


def test_a_streamed_response_is_stored_before_its_completed_event_so_another_replica_continues_it_at_once(
    ledger_gateway,
):
    """The turn's task outlives its stream by the late-frame grace (here 5 s): what is kept of it is written before
    `response.completed` goes out, not when the task ends, so a follow-up sent to another replica at once finds it."""
    first_replica = ledger_gateway(api_keys=KEYS, throttle_ms=0, late_frame_grace=5.0)
    second_replica = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    m = marker()
    # `hang` after the terminal event: the vendor keeps the connection open, the task reads late frames for 5 s.
    model = "openai/tools;fault=hang;at=after_terminal"
    with client_of(first_replica).responses.stream(model=model, input=f"weather? {m}", tools=TOOLS) as stream:
        list(stream)
        first = stream.get_final_response()
    calls = [item for item in first.output if item.type == "function_call"]
    second = client_of(second_replica).responses.create(
        model="anthropic/text", previous_response_id=first.id, input=results_for(calls, m)
    )
    assert second.status == "completed"
    assert f"weather? {m}" in sent_to(second_replica, f"{m}-w", "anthropic")


def test_another_keys_response_an_unknown_one_and_a_deleted_one_are_not_found(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    mine, theirs = client_of(gw), client_of(gw, OTHER_KEY)
    m = marker()
    first = mine.responses.create(model="anthropic/text", input=m)
    for response_id in (first.id, "resp_req_000000000000ffffffffffffffff"):
        with pytest.raises(openai.NotFoundError) as raised:
            theirs.responses.create(model="anthropic/text", input=marker(), previous_response_id=response_id)
        assert raised.value.status_code == 404
        assert raised.value.body == {
            "message": f"Previous response with id {response_id!r} not found.", "type": "invalid_request_error",
            "param": "previous_response_id", "code": "previous_response_not_found",
        }  # fmt: skip
        with pytest.raises(openai.NotFoundError):
            theirs.responses.retrieve(response_id)
        with pytest.raises(openai.NotFoundError):
            theirs.responses.delete(response_id)
    # The owner's copy survived the other key's attempts; deleting it is final.
    assert mine.responses.retrieve(first.id).id == first.id
    raw = gw.http.delete(f"/v1/responses/{first.id}", headers={"Authorization": f"Bearer {KEY}"})
    assert raw.status_code == 200 and raw.json() == {"id": first.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError) as raised:
        mine.responses.retrieve(first.id)
    assert raised.value.body == {"message": f"Response with id {first.id!r} not found.", "type": "invalid_request_error",
                                 "param": None, "code": "not_found"}  # fmt: skip
    with pytest.raises(openai.NotFoundError):
        mine.responses.create(model="anthropic/text", input=marker(), previous_response_id=first.id)
    with pytest.raises(openai.NotFoundError):
        mine.responses.delete(first.id)


def test_store_false_keeps_nothing_and_retention_expires_what_was_kept(ledger_gateway):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    unstored = client.responses.create(model="google/text", input=marker(), store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="google/text", input=marker(), previous_response_id=unstored.id)
    brief = ledger_gateway(api_keys=KEYS, throttle_ms=0, responses_retention_days=1 / 86_400_000)  # 1 ms
    kept = client_of(brief).responses.create(model="google/text", input=marker())
    with pytest.raises(openai.NotFoundError):
        client_of(brief).responses.retrieve(kept.id)
    assert client.responses.retrieve(kept.id).id == kept.id  # the 30-day replica on the same store still has it


def test_item_references_resolve_to_stored_items_as_the_ai_sdk_sends_them(ledger_gateway):
    """With `store: true` the AI SDK sends earlier output items as `item_reference`s, without `previous_response_id`."""
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    user = {"role": "user", "content": [{"type": "input_text", "text": f"weather? {m}"}]}
    first = client.responses.create(model="anthropic/tools", input=[user], tools=TOOLS, store=True)
    calls = [item for item in first.output if item.type == "function_call"]
    references = [{"type": "item_reference", "id": item.id} for item in first.output]
    second = client.responses.create(
        model="openai/text", input=[user, *references, *results_for(calls, m)], tools=TOOLS
    )
    assert second.status == "completed"
    raw = sent_to(gw, f"{m}-w", "openai")
    assert all(c.call_id in raw for c in calls) and "Let me check." in raw
    # Another key cannot refer to these items.
    body = {"model": "openai/text", "input": [user, references[0]]}
    response = gw.http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {OTHER_KEY}"})
    assert response.status_code == 400, response.text
    assert (
        response.json()["error"]["param"] == "input.1.id" and first.output[0].id in response.json()["error"]["message"]
    )


@pytest.mark.parametrize("vendor", VENDORS)
def test_stored_reasoning_state_returns_to_the_same_model_only_even_without_the_include(ledger_gateway, vendor):
    gw = ledger_gateway(api_keys=KEYS, throttle_ms=0)
    client = client_of(gw)
    m = marker()
    first = client.responses.create(model=f"{vendor}/thinking", input=m)
    reasoning = [item for item in first.output if item.type == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0].encrypted_content is None  # the client did not ask for it
    client.responses.create(model=f"{vendor}/thinking", previous_response_id=first.id, input=f"again {m}-2")
    assert SIGNATURE_ON_THE_WIRE[vendor] in sent_to(gw, f"{m}-2", vendor)
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    client.responses.create(model=f"{other}/text", previous_response_id=first.id, input=f"again {m}-3")
    foreign = sent_to(gw, f"{m}-3", other)
    assert m in foreign and all(s not in foreign for s in SIGNATURE_ON_THE_WIRE.values()) and "gw1." not in foreign


def test_an_item_reference_names_an_item_of_the_conversation_continued(ledger_gateway):
    gw = ledger_gateway(throttle_ms=0)  # authentication off: stored responses belong to no key
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0, timeout=30)
    m = marker()
    first = client.responses.create(
        model="openai/text", input=[{"type": "message", "id": "msg_mine_1", "role": "user", "content": m}]
    )
    second = client.responses.create(
        model="anthropic/text", previous_response_id=first.id,
        input=[{"type": "item_reference", "id": "msg_mine_1"}, {"role": "user", "content": f"{m}-2"}],
    )  # fmt: skip
    assert second.status == "completed"
    assert sent_to(gw, f"{m}-2", "anthropic").count(m) >= 2  # the referred message, and the original before it
    assert client.responses.retrieve(second.id).previous_response_id == first.id


async def test_the_store_keeps_scopes_expires_and_deletes_on_each_database(ledger_url):
    ledger = open_ledger(ledger_url)
    await ledger.start()
    try:
        await ledger.save_response("resp_a", None, 1_000, '{"a": 1}', expired_before=0)
        await ledger.save_response("resp_b", "key-1", 2_000, '{"b": 1}', expired_before=0)
        assert await ledger.load_response("resp_a", None, 0) == '{"a": 1}'
        assert await ledger.load_response("resp_a", "key-1", 0) is None  # no key's response is no key's only
        assert await ledger.load_response("resp_b", None, 0) is None
        assert await ledger.load_response("resp_b", "key-1", 1_500) == '{"b": 1}'
        assert await ledger.load_response("resp_a", None, 1_500) is None  # past the retention
        assert not await ledger.delete_response("resp_b", "key-2", 0)
        assert await ledger.delete_response("resp_b", "key-1", 0)
        assert await ledger.load_response("resp_b", "key-1", 0) is None
        # Writing deletes what is past the retention, of every key.
        await ledger.save_response("resp_c", "key-2", 3_000, "{}", expired_before=2_500)
        assert await ledger.load_response("resp_a", None, 0) is None
        # With `keep_per_key`, writing deletes the key's oldest beyond its newest (no other key's).
        for n, response_id in enumerate(("resp_d", "resp_e", "resp_f")):
            await ledger.save_response(response_id, "key-3", 4_000 + n, "{}", expired_before=0, keep_per_key=2)
        assert await ledger.load_response("resp_d", "key-3", 0) is None
        assert (
            await ledger.load_response("resp_e", "key-3", 0) == "{}" == await ledger.load_response("resp_f", "key-3", 0)
        )
        assert await ledger.load_response("resp_c", "key-2", 0) == "{}"
    finally:
        await ledger.aclose()
