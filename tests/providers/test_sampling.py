"""The sampling fields apps moving from the OpenAI API send (`seed`, the penalties, `logit_bias`, `n`,
`logprobs`): passed with their meaning to the vendors that honour them, a 400 naming the field for the others,
or dropped and named (`X-Gateway-Dropped-Params` and the record) when the request, the key or the route asks to
drop params (docs/api.md, "Sampling fields and drop_params").

Through the Chat Completions door with the official `openai` SDK and the Gemini door over loopback HTTP, against
the gateway in front of the simulator, whose request log shows what each vendor was sent.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.conftest import marker

HERE = Path(__file__).parents[1]
PLAIN, DROPPER = "sk-sampling-plain", "sk-sampling-dropper"
SAMPLING = {"seed": 7, "frequency_penalty": 0.5, "presence_penalty": -0.25}


@pytest.fixture(scope="module")
def gw(gateway_factory: Any, tmp_path_factory: Any) -> Any:
    folder = tmp_path_factory.mktemp("sampling")
    catalog = json.loads((HERE / "catalog.json").read_text())
    catalog["routes"] = [{"name": "lenient", "model": "anthropic/text", "dropParams": True}]
    (folder / "catalog.json").write_text(json.dumps(catalog))
    keys = [
        {"name": "plain", "sha256": hashlib.sha256(PLAIN.encode()).hexdigest()},
        {"name": "dropper", "sha256": hashlib.sha256(DROPPER.encode()).hexdigest(), "drop_params": True},
    ]
    (folder / "keys.json").write_text(json.dumps({"keys": keys}))
    return gateway_factory(throttle_ms=0, catalog=str(folder / "catalog.json"), keys_file=str(folder / "keys.json"))


def chat(gw: Any, key: str = PLAIN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0, timeout=30)


def sent(gw: Any, m: str) -> dict[str, Any]:
    (seen,) = gw.sim.seen(m)
    body: dict[str, Any] = seen["body"]
    return body


def record(gw: Any, request_id: str, key: str = PLAIN) -> dict[str, Any]:
    gw.job(request_id)
    response = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_chat_completions_vendors_get_every_field_as_sent(gw: Any) -> None:
    m = marker()
    raw = chat(gw).chat.completions.with_raw_response.create(
        model="compat/text", messages=[{"role": "user", "content": m}], logit_bias={"50256": -100}, **SAMPLING
    )
    assert raw.http_response.status_code == 200 and "x-gateway-dropped-params" not in raw.headers
    body = sent(gw, m)
    assert {k: body.get(k) for k in SAMPLING} == SAMPLING and body["logit_bias"] == {"50256": -100.0}


def test_gemini_gets_seed_and_penalties_in_its_generation_config(gw: Any) -> None:
    m = marker()
    raw = chat(gw).chat.completions.with_raw_response.create(
        model="google/text", messages=[{"role": "user", "content": m}], **SAMPLING
    )
    assert raw.http_response.status_code == 200
    config = sent(gw, m)["generationConfig"]
    assert (config["seed"], config["frequencyPenalty"], config["presencePenalty"]) == (7, 0.5, -0.25)


@pytest.mark.parametrize(
    ("model", "fields", "refused"),
    [
        ("anthropic/text", SAMPLING, "seed"),
        ("openai/text", {"presence_penalty": 1.0}, "presence_penalty"),
        ("google/text", {"logit_bias": {"1": 5}}, "logit_bias"),
        ("compat/text", {"n": 2}, "n"),
        ("compat/text", {"logprobs": True, "top_logprobs": 2}, "logprobs"),
    ],
)
def test_a_vendor_that_cannot_honour_a_field_refuses_with_400_naming_it(
    gw: Any, model: str, fields: dict[str, Any], refused: str
) -> None:
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        chat(gw).chat.completions.create(model=model, messages=[{"role": "user", "content": m}], **fields)
    assert raised.value.status_code == 400 and raised.value.param == refused and "drop_params" in raised.value.message
    assert gw.sim.seen(m) == []  # before any upstream call


def test_zero_penalties_and_defaults_ask_for_nothing(gw: Any) -> None:
    raw = chat(gw).chat.completions.with_raw_response.create(
        model="anthropic/text", messages=[{"role": "user", "content": marker()}], frequency_penalty=0,
        presence_penalty=0.0, n=1, logprobs=False, logit_bias={},
    )  # fmt: skip
    assert raw.http_response.status_code == 200 and "x-gateway-dropped-params" not in raw.headers


@pytest.mark.parametrize("how", ["body", "header", "key", "route"])
def test_drop_params_sends_the_turn_without_them_and_names_them(gw: Any, how: str) -> None:
    m = marker()
    key = DROPPER if how == "key" else PLAIN
    raw = chat(gw, key).chat.completions.with_raw_response.create(
        model="lenient" if how == "route" else "anthropic/text",
        messages=[{"role": "user", "content": m}],
        n=2,
        extra_body={"drop_params": True} if how == "body" else None,
        extra_headers={"X-Gateway-Drop-Params": "true"} if how == "header" else None,
        **SAMPLING,
    )
    assert raw.http_response.status_code == 200
    dropped = ["n", "seed", "frequency_penalty", "presence_penalty"]
    assert raw.headers["x-gateway-dropped-params"] == ", ".join(dropped)
    assert not set(SAMPLING) & set(sent(gw, m))
    assert record(gw, raw.headers["x-request-id"], key)["droppedParams"] == dropped


def test_a_stream_that_drops_params_names_them_too(gw: Any) -> None:
    with chat(gw).chat.completions.with_streaming_response.create(
        model="openai/text", messages=[{"role": "user", "content": marker()}], stream=True, seed=1,
        extra_headers={"X-Gateway-Drop-Params": "true"},
    ) as response:  # fmt: skip
        assert response.headers["x-gateway-dropped-params"] == "seed"
        assert "[DONE]" in response.read().decode()


def test_the_gemini_door_passes_seed_to_gemini_and_refuses_it_elsewhere(gw: Any) -> None:
    def post(vendor: str, m: str, **headers: str) -> Any:
        body = {"contents": [{"role": "user", "parts": [{"text": m}]}], "generationConfig": {"seed": 3}}
        return gw.http.post(
            f"/v1beta/models/{vendor}/text:generateContent", json=body, headers={"x-goog-api-key": PLAIN, **headers}
        )

    m = marker()
    assert post("google", m).status_code == 200 and sent(gw, m)["generationConfig"]["seed"] == 3
    refused = post("anthropic", marker())
    assert refused.status_code == 400 and "seed" in refused.text
    dropped = post("anthropic", marker(), **{"X-Gateway-Drop-Params": "true"})
    assert dropped.status_code == 200 and dropped.headers["x-gateway-dropped-params"] == "seed"
