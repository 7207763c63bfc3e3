"""The Gemini door's JSON-array stream (`:streamGenerateContent` without `alt=sse`), as a raw HTTP client reads
it over loopback against the gateway in front of the simulator: one JSON array streamed element by element, each
element a chunk as in SSE mode, a failure after the start a last `{"error": …}` element. No Google SDK asks for
this form (google-genai and @google/genai always send `alt=sse`), so the client here is httpx."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-gemini-array-0001"
AUTH = {"x-goog-api-key": KEY}


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"gemini-array:{KEY}")


def _body(text: str) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


def stream_array(gw: Any, model: str, body: dict[str, Any], query: str = "") -> tuple[httpx.Response, list[bytes]]:
    """The answer and the pieces of its body as they arrived."""
    pieces: list[bytes] = []
    with httpx.Client(timeout=30) as http:
        url = f"{gw.url}/v1beta/models/{model}:streamGenerateContent{query}"
        with http.stream("POST", url, json=body, headers=AUTH) as response:
            pieces.extend(response.iter_raw())
    return response, pieces


def record(gw: Any, request_id: str) -> dict[str, Any]:
    gw.job(request_id)
    return gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {KEY}"}).json()


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("query", ["", "?alt=json"])
def test_the_chunks_come_as_one_json_array_element_by_element(gw, vendor, query):
    m = marker()
    response, pieces = stream_array(gw, f"{vendor}/slow;n=12;delay_ms=5", _body(m), query)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = b"".join(pieces)
    assert body.startswith(b"[{") and body.endswith(b"}]")
    chunks = json.loads(body)
    # Element by element: the first element went out whole, before the last one existed.
    first_element = pieces[0][1:].split(b",\r\n")[0]
    assert json.loads(first_element) == chunks[0] and len(pieces) > 1
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert text == "".join(f"{i:07d} " for i in range(12))
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["totalTokenCount"] > 0
    assert {c["responseId"] for c in chunks} == {response.headers["x-request-id"]}
    assert {c["modelVersion"] for c in chunks} == {f"{vendor}/slow;n=12;delay_ms=5"}
    assert record(gw, response.headers["x-request-id"])["door"] == "gemini"


@pytest.mark.parametrize("vendor", VENDORS)
def test_function_calls_are_whole_elements(gw, vendor):
    response, pieces = stream_array(gw, f"{vendor}/tools", _body(marker()))
    chunks = json.loads(b"".join(pieces))
    calls = [p["functionCall"] for c in chunks for p in c["candidates"][0]["content"]["parts"] if "functionCall" in p]
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    assert all(isinstance(c["args"], dict) and c["id"] for c in calls)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("scenario", "code", "status"), [
    ("error-mid-stream", 502, "UNAVAILABLE"), ("truncated", 502, "UNAVAILABLE"), ("refusal", 400, "INVALID_ARGUMENT")])  # fmt: skip
def test_a_failure_after_the_start_is_a_last_error_element_and_the_array_still_closes(
    gw, vendor, scenario, code, status
):
    response, pieces = stream_array(gw, f"{vendor}/{scenario}", _body(marker()))
    assert response.status_code == 200
    chunks = json.loads(b"".join(pieces))
    assert len(chunks) >= 2 and all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    error = chunks[-1]["error"]
    assert error["code"] == code and error["status"] == status and error["message"]
    assert record(gw, response.headers["x-request-id"])["outcome"] == "error"


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_failure_before_the_start_is_an_http_error_in_googles_shape(gw, vendor):
    response, pieces = stream_array(gw, f"{vendor}/http-429", _body(marker()))
    assert response.status_code == 429
    assert json.loads(b"".join(pieces))["error"]["status"] == "RESOURCE_EXHAUSTED"


def test_a_resumable_array_stream_and_an_unknown_alt_are_400_before_any_upstream_call(gw):
    m = marker()
    response = gw.http.post("/v1beta/models/anthropic/text:streamGenerateContent", json=_body(m),
                            headers={**AUTH, "X-Gateway-Resumable": "true"})  # fmt: skip
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["message"].startswith("x-gateway-resumable:")
    assert "alt=sse" in error["message"]
    response = gw.http.post(
        "/v1beta/models/anthropic/text:streamGenerateContent?alt=proto", json=_body(m), headers=AUTH
    )
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("alt:")
    assert gw.sim.seen(m) == []
