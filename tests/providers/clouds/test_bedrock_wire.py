"""Bedrock's wire, piece by piece: the simulator's event-stream frames read by botocore's own decoder, its SigV4
check against botocore's signer, the adapter's reading of Bedrock's errors; then a fuzz of the event-stream
decoder path over loopback (torn frames, bad CRCs, oversize headers and payloads, bad base64, a frame split
byte by byte), where every turn ends with one terminal event and a record."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from app.providers.clouds.bedrock.claude import cloud_text
from simulator import bedrock as wire
from simulator import scenarios as s
from tests.conformance import check_frames, parse_sse
from tests.conftest import examples, marker, turn
from tests.providers.clouds.conftest import SONNET


def _decode(data: bytes) -> list:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return list(buffer)


def test_the_simulators_frames_are_what_botocore_decodes():
    frames = [f for f in wire.encode(s.build("tools", "hi"), "tools") if isinstance(f, bytes)]
    messages = _decode(b"".join(frames))
    assert len(messages) == len(frames)
    first = messages[0].to_response_dict()
    assert messages[0].headers == {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    assert json.loads(base64.b64decode(json.loads(first["body"])["bytes"]))["type"] == "message_start"
    error = _decode(wire.exception("throttlingException", "slow down"))[0]
    assert error.headers[":message-type"] == "exception" and error.headers[":exception-type"] == "throttlingException"
    with pytest.raises(ChecksumMismatch):
        _decode(frames[0][:-1] + bytes([frames[0][-1] ^ 1]))


def _signed(url: str, body: bytes, key_id: str, secret: str) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body, headers={"content-type": "application/json"})
    SigV4Auth(Credentials(key_id, secret), "bedrock", "us-east-1").add_auth(request)
    return dict(request.headers)


@pytest.mark.parametrize(
    "secret, reason", [(wire.TEST_SECRET_ACCESS_KEY, None), ("another-secret", "InvalidSignatureException")]
)
def test_the_simulator_recomputes_the_signature(sim, secret, reason):
    url = f"{sim.url}/bedrock/model/{SONNET}/invoke"
    body = json.dumps(
        {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    headers = _signed(url, body, wire.TEST_ACCESS_KEY_ID, secret)
    response = httpx.post(url, content=body, headers=headers)
    if reason is None:
        assert response.status_code == 200 and response.json()["content"][0]["type"] == "text"
        tampered = httpx.post(url, content=body.replace(b"hi", b"ho"), headers=headers)  # the body is signed too
        assert tampered.headers["x-amzn-errortype"].startswith("InvalidSignatureException:")
    else:
        assert response.status_code == 403 and response.headers["x-amzn-errortype"].startswith(f"{reason}:")
        assert "signature we calculated does not match" in response.json()["message"]
    unsigned = httpx.post(url, content=body)
    assert unsigned.status_code == 403 and unsigned.json() == {"message": "Missing Authentication Token"}


def test_arns_and_access_key_ids_are_kept_out_of_error_text():
    text = (
        "User: arn:aws:sts::123456789012:assumed-role/gateway/i-0abc is not authorized to perform: "
        "bedrock:InvokeModelWithResponseStream on resource: arn:aws:bedrock:us-east-1:123456789012:inference-profile/x "
        "with AKIAIOSFODNN7EXAMPLE"
    )
    clean = cloud_text(text)
    assert "123456789012" not in clean and "AKIAIOSFODNN7EXAMPLE" not in clean
    assert clean.startswith(
        "User: [arn] is not authorized to perform: bedrock:InvokeModelWithResponseStream on resource: [arn]"
    )


# ------------------------------------------------------------------------------------------------- fuzz

FAULTS = ["torn", "split", "bad_crc", "bad_prelude_crc", "huge_headers", "huge_payload", "bad_base64"]


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenario=st.sampled_from(["text", "thinking", "tools"]), fault=st.sampled_from(FAULTS), at=st.integers(0, 12))
def test_a_broken_event_stream_ends_each_turn_with_one_terminal_event_and_a_record(bedrock, scenario, fault, at):
    model = f"bedrock/{scenario};eventstream={fault};at={at}"
    response = bedrock.http.post("/v1/stream", json=turn(model, marker()))
    assert response.status_code == 200
    events = check_frames(parse_sse(response.text))  # one terminal event, last, and every other invariant
    terminal = events[-1]
    assert [e["type"] for e in events].count(terminal["type"]) == 1 and terminal["type"] in ("done", "error")
    job = bedrock.job(response.headers["x-request-id"])
    assert job.attempts and job.attempts[-1].ended
    if fault == "split":  # valid: a frame across many reads decodes as a whole one
        assert terminal["type"] == "done", terminal.get("errorMessage")
    else:
        assert terminal["type"] == "error", terminal  # (an `at` past the last frame breaks the last one)
        assert "internal error" not in terminal["errorMessage"], terminal["errorMessage"]
        kinds = {a.kind for a in job.attempts}
        assert kinds <= {"malformed", "event_too_large", "truncated"}, (kinds, terminal["errorMessage"])
    record = bedrock.http.get(f"/v1/requests/{response.headers['x-request-id']}")
    assert record.status_code == 200 and record.json()["outcome"] == terminal["type"], record.text


def test_the_bedrock_seam_still_fits_the_sdk():
    import inspect

    import anthropic

    from app.seams.bedrock import SigningBedrockClient
    from app.seams.stainless import AnthropicRequestOptions

    hook = anthropic.AsyncAnthropicBedrock._prepare_request
    assert inspect.iscoroutinefunction(hook) and list(inspect.signature(hook).parameters) == ["self", "request"]
    options = anthropic.AsyncAnthropicBedrock._prepare_options  # the InvokeModel body a count reads (`invoke_body`)
    assert inspect.iscoroutinefunction(options) and list(inspect.signature(options).parameters) == ["self", "options"]
    assert "json_data" in AnthropicRequestOptions.model_fields  # the body the Bedrock client moves `model` out of
    client = SigningBedrockClient(aws_region="eu-west-1")
    assert str(client.base_url).startswith("https://bedrock-runtime.eu-west-1.amazonaws.com")
