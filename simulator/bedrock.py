"""Amazon Bedrock's runtime wire for Anthropic models (`InvokeModelWithResponseStream`, `InvokeModel`).

Routes (under the simulator's mount): `POST /bedrock/model/{modelId}/invoke-with-response-stream`,
`POST /bedrock/model/{modelId}/invoke` and `POST /bedrock/model/{modelId}/count-tokens` (`CountTokens`) — a
provider's base URL is `<simulator>/bedrock`, as a real one is `https://bedrock-runtime.<region>.amazonaws.com`.

- Authentication as the service checks it: the `Authorization` header's SigV4 signature is recomputed from the
  request (method, path as sent, query, the signed headers, the SHA-256 of the body) with the secret of its
  access key id among the configured test credentials (`BedrockWire.keys`), with botocore's own `SigV4Auth`,
  and compared. A mismatch is 403 `InvalidSignatureException`, an unknown key id or wrong session token 403
  `UnrecognizedClientException`, a revoked (expired) key 403 `ExpiredTokenException`, a request dated more than
  5 minutes away 403 `InvalidSignatureException` (signature expired).
- Errors as Bedrock sends them: the status, `x-amzn-ErrorType: <Name>:http://internal.amazon.com/coral/…`,
  `x-amzn-RequestId`, body `{"message": …}` (`http-429` is a `ThrottlingException`).
- The stream: `application/vnd.amazon.eventstream` frames (prelude with total and headers lengths and its
  CRC32, headers, payload, CRC32 of the whole message); each Anthropic event of the scenario is a `chunk` event
  whose payload is `{"bytes": base64(event JSON)}`; an Anthropic `error` event is an `exception` frame
  (`modelStreamErrorException`, or the model id's `exception=` param: `throttlingException`, …).
- Content: the Anthropic scenarios (`simulator.scenarios`, chosen by the model id as everywhere).
- STS: `POST /sts` `AssumeRoleWithWebIdentity` (IRSA's call) issues temporary credentials for an accepted web
  identity token; the Bedrock routes accept them until they are revoked.
- `deny=1` in the model id: 403 `AccessDeniedException` whose message names the role's and the profile's ARNs.
- `throttle=N` in the model id: the first N requests of a model id and prompt answer 429 `ThrottlingException`.
- `error_bytes=N` in the model id: 500 `InternalServerException` whose message is N bytes long.
- `CountTokens`: the body `{"input": {"invokeModel": {"body": <base64 of an InvokeModel body>}}}` answered
  `{"inputTokens": N}` (`scenarios.token_count` of the InvokeModel body, recorded with endpoint `count`); a
  cross-region inference profile id (`us.anthropic.…`) is a 400 `ValidationException`: it counts on
  foundation model ids.
- Framing faults, by model id params `eventstream=<fault>;at=<frame index>` (default 3): `torn` (the frame's
  first half, then the body ends), `bad_crc` (the message CRC flipped), `bad_prelude_crc`, `huge_headers`
  (a prelude announcing 200 KiB of headers), `huge_payload` (a prelude announcing 30 MiB), `bad_base64`
  (a chunk whose `bytes` is not base64), `split` (the frame sent one byte per write: valid, must decode).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import struct
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from simulator import anthropic, scenarios as s

ROUTES = ("/bedrock/model/{model_id:path}/invoke-with-response-stream", "/bedrock/model/{model_id:path}/invoke")
COUNT_ROUTE = "/bedrock/model/{model_id:path}/count-tokens"
INVOKE_BODY_REFUSED = (
    "Malformed input request: #: required key [anthropic_version] not found, extraneous keys [model, stream] "
    "are not permitted"
)
_PROFILE = re.compile(r"^(?:us|us-gov|eu|apac|jp|au|ca|global)\.")  # a cross-region inference profile id
STS_ROUTES = ("/sts", "/sts/")  # `AWS_ENDPOINT_URL_STS=<simulator>/sts`
CONTENT_TYPE = "application/vnd.amazon.eventstream"
VENDOR = SimpleNamespace(name="bedrock")  # what the request log calls these requests
MAX_SKEW_S = 300
# The test credentials the simulator accepts unless told otherwise (demo mode and tests); never real ones.
TEST_ACCESS_KEY_ID = "ASIASIMULATORTEST0001"
TEST_SECRET_ACCESS_KEY = "simulator-bedrock-test-secret-not-a-real-key"
ERROR_NAMES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$"
)


@dataclass
class Key:
    secret: str
    token: str | None = None


@dataclass
class BedrockWire:
    """The Bedrock routes and the credentials they accept: `keys` (access key id → secret and session token);
    `expired` key ids answer `ExpiredTokenException` (a test revokes credentials it rotated away from)."""

    record: Callable[..., Any]
    keys: dict[str, Key] = field(default_factory=lambda: {TEST_ACCESS_KEY_ID: Key(TEST_SECRET_ACCESS_KEY)})
    expired: set[str] = field(default_factory=set)
    throttled: dict[tuple[str, str], int] = field(default_factory=dict)  # (model, prompt) → requests throttled
    web_identity_tokens: set[str] = field(default_factory=set)  # what STS takes (a service account's tokens)
    sts_lifetime_s: int = 300  # how long the credentials STS issues last
    issued: list[str] = field(default_factory=list)  # the access key ids STS issued, oldest first

    @property
    def routes(self) -> list[Route]:
        return [
            *(Route(path, self.invoke, methods=["POST"]) for path in ROUTES),
            Route(COUNT_ROUTE, self.count_tokens, methods=["POST"]),
            *(Route(path, self.assume_role_with_web_identity, methods=["POST"]) for path in STS_ROUTES),
        ]

    async def assume_role_with_web_identity(self, request: Request) -> Response:
        """STS `AssumeRoleWithWebIdentity` (what botocore calls for IRSA: `AWS_ROLE_ARN` and
        `AWS_WEB_IDENTITY_TOKEN_FILE`): temporary credentials, which the Bedrock routes then accept, for a web
        identity token among `web_identity_tokens`; else STS's `InvalidIdentityToken` error."""
        form = {k: v[0] for k, v in urllib.parse.parse_qs((await request.body()).decode()).items()}
        request_id = str(uuid.uuid4())
        if (
            form.get("Action") != "AssumeRoleWithWebIdentity"
            or form.get("WebIdentityToken") not in self.web_identity_tokens
        ):
            return Response(_STS_ERROR.format(request_id=request_id), 400, media_type="text/xml")
        key_id = "ASIASTS" + uuid.uuid4().hex[:13].upper()
        secret, token = uuid.uuid4().hex + uuid.uuid4().hex, "sts-session-" + uuid.uuid4().hex
        self.keys[key_id] = Key(secret, token)
        self.issued.append(key_id)
        expires = datetime.fromtimestamp(time.time() + self.sts_lifetime_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Response(
            _STS_ANSWER.format(
                key_id=key_id,
                secret=secret,
                token=token,
                expires=expires,
                request_id=request_id,
                role=str(form.get("RoleArn")),
                session=str(form.get("RoleSessionName")),
            ),
            media_type="text/xml",
        )

    async def invoke(self, request: Request) -> Response | "EventStreamResponse":
        body_bytes, request_id, refused = await self._read_signed(request)
        if refused is not None:
            return refused
        model = request.path_params["model_id"]
        raw = body_bytes.decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            return error_response(
                400,
                "ValidationException",
                "Malformed input request, please reformat your input and try again.",
                request_id,
            )
        if not _invoke_body(body):
            return error_response(400, "ValidationException", INVOKE_BODY_REFUSED, request_id)
        scenario = s.build(model, anthropic.prompt_of(body), anthropic.tool_results_of(body))
        entry = self.record(request, VENDOR, model, scenario, body, raw)
        failed = self._refused(
            request, entry, model, anthropic.prompt_of(body), scenario, request_id, "InvokeModelWithResponseStream"
        )
        if failed is not None:
            return failed
        if request.url.path.endswith("/invoke"):
            return self._whole(scenario, model, entry, request_id)
        return EventStreamResponse(scenario, model, entry, request_id)

    async def count_tokens(self, request: Request) -> Response:
        """`CountTokens`: `{"input": {"invokeModel": {"body": <base64 of an InvokeModel body>}}}` answered
        `{"inputTokens": N}` (`scenarios.token_count` of the decoded InvokeModel body), signed, throttled and
        refused like the invoke routes. The model id must be a foundation model's: a cross-region inference
        profile (`us.anthropic.…`) is a 400 `ValidationException`."""
        body_bytes, request_id, refused = await self._read_signed(request)
        if refused is not None:
            return refused
        model = request.path_params["model_id"]
        try:
            encoded = json.loads(body_bytes)["input"]["invokeModel"]["body"]
            body = json.loads(base64.b64decode(encoded, validate=True))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return error_response(
                400,
                "ValidationException",
                "Malformed input request: input.invokeModel.body must be the base64 of an InvokeModel JSON body.",
                request_id,
            )
        if not _invoke_body(body):
            return error_response(400, "ValidationException", INVOKE_BODY_REFUSED, request_id)
        if _PROFILE.match(model):
            return error_response(400, "ValidationException", "The provided model identifier is invalid.", request_id)
        raw = json.dumps(body)
        scenario = s.build(model, anthropic.prompt_of(body))
        entry = self.record(request, VENDOR, model, scenario, body, raw, endpoint="count")
        failed = self._refused(request, entry, model, anthropic.prompt_of(body), scenario, request_id, "CountTokens")
        if failed is not None:
            return failed
        entry.status, entry.completed, entry.finished_at = 200, True, time.time()
        entry.touch()
        return JSONResponse({"inputTokens": s.token_count(body)}, headers={"x-amzn-RequestId": request_id})

    async def _read_signed(self, request: Request) -> tuple[bytes, str, Response | None]:
        """The request's body, a fresh request id, and the 403 to answer when its signature is refused."""
        body = await request.body()
        request_id = str(uuid.uuid4())
        refused = self.check_signature(request, body)
        return body, request_id, None if refused is None else error_response(403, *refused, request_id)

    def _refused(
        self, request: Request, entry: Any, model: str, prompt: str, scenario: s.Scenario, request_id: str, action: str
    ) -> Response | None:
        """The error answer the model id's params or the scenario call for (`throttle=N`, `deny=1`,
        `error_bytes=N`, `http-<status>`), recorded on `entry`; None to go on."""
        access_key = _AUTH.match(request.headers["authorization"]).group(1)  # type: ignore[union-attr]
        entry.headers["aws-access-key-id"] = access_key  # which credentials signed it (an id, never the secret)
        params = _params(model)
        status, name, message, headers = 0, "", "", None
        if self.throttled.get((model, prompt), 0) < int(params.get("throttle", "0")):  # `throttle=N`: the first N
            self.throttled[(model, prompt)] = self.throttled.get((model, prompt), 0) + 1
            status, name, message = 429, "ThrottlingException", "Too many requests, please wait before trying again."
        elif "deny" in params:  # `deny=1`: the role may not call the model (the text names both ARNs)
            status, name, message = (
                403,
                "AccessDeniedException",
                DENIED.format(action=action, model=model.split(";")[0]),
            )
        elif "error_bytes" in params:  # `error_bytes=N`: a 500 whose message is N bytes long
            status, name, message = 500, "InternalServerException", "x" * int(params["error_bytes"])
        elif scenario.http_error is not None:
            error = scenario.http_error
            status, name, message, headers = (
                error.status,
                ERROR_NAMES.get(error.status, "InternalServerException"),
                error.message,
                error.headers,
            )
        if not status:
            return None
        entry.status, entry.completed, entry.finished_at = status, True, time.time()
        entry.touch()
        return error_response(status, name, message, request_id, headers)

    def check_signature(self, request: Request, body: bytes) -> tuple[str, str] | None:
        """None when the SigV4 signature is the one the request's credentials make, else (exception, message)."""
        auth = _AUTH.match(request.headers.get("authorization", ""))
        if auth is None:
            return (
                "AccessDeniedException",
                "Missing Authentication Token"
                if "authorization" not in request.headers
                else "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.",
            )
        key_id, day, region, service, signed, signature = auth.groups()
        if key_id in self.expired:
            return "ExpiredTokenException", "The security token included in the request is expired"
        key = self.keys.get(key_id)
        if key is None or request.headers.get("x-amz-security-token") != key.token:
            return "UnrecognizedClientException", "The security token included in the request is invalid."
        amz_date = request.headers.get("x-amz-date", "")
        try:
            when = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            return "InvalidSignatureException", "Date must be in ISO-8601 'basic format'."
        if abs(time.time() - when.timestamp()) > MAX_SKEW_S or not amz_date.startswith(day):
            return (
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier or later than 5 minutes from now.",
            )
        names = signed.split(";")
        if "host" not in names or any(n not in request.headers for n in names):
            return (
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        query = request.scope.get("query_string") or b""
        url = f"http://{request.headers['host']}{raw_path.decode('latin-1')}" + (
            f"?{query.decode('latin-1')}" if query else ""
        )
        canonical = AWSRequest(
            method=request.method, url=url, headers={n: request.headers[n] for n in names}, data=body
        )
        canonical.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials(key_id, key.secret, key.token), service, region)
        expected = signer.signature(signer.string_to_sign(canonical, signer.canonical_request(canonical)), canonical)
        if signer.signed_headers(signer.headers_to_sign(canonical)) != signed or expected != signature:
            return "InvalidSignatureException", (
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
            )
        return None

    def _whole(self, scenario: s.Scenario, model: str, entry: Any, request_id: str) -> Response:
        """`InvokeModel`: the Anthropic message as one JSON body (the text and tool calls of the scenario)."""
        content: list[dict[str, Any]] = []
        usage: dict[str, Any] = {}
        stop = "end_turn"
        for item in anthropic.encode(scenario, model):
            if not isinstance(item, bytes):
                continue
            event = _event_of(item)
            if event.get("type") == "message_start":
                usage = dict(event["message"]["usage"])
            elif event.get("type") == "content_block_start":
                content.append(dict(event["content_block"]))
            elif event.get("type") == "content_block_delta":
                delta, block = event["delta"], content[-1]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                elif delta["type"] == "input_json_delta":
                    block["_args"] = block.get("_args", "") + delta["partial_json"]
                elif delta["type"] == "thinking_delta":
                    block["thinking"] += delta["thinking"]
                elif delta["type"] == "signature_delta":
                    block["signature"] += delta["signature"]
            elif event.get("type") == "message_delta":
                stop = event["delta"]["stop_reason"]
                usage["output_tokens"] = event["usage"]["output_tokens"]
        for block in content:
            if "_args" in block:
                block["input"] = json.loads(block.pop("_args") or "{}")
        entry.status, entry.completed, entry.finished_at = 200, True, time.time()
        entry.touch()
        return JSONResponse(
            {
                "id": "msg_sim_0001",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            },
            headers={"x-amzn-RequestId": request_id},
        )


DENIED = (
    "User: arn:aws:sts::123456789012:assumed-role/llm-gateway-bedrock/botocore-session-1 is not authorized to "
    "perform: bedrock:{action} on resource: "
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/{model} because no identity-based policy allows it"
)
_STS_ANSWER = """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials><AccessKeyId>{key_id}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>
      <SessionToken>{token}</SessionToken><Expiration>{expires}</Expiration></Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:llm-gateway</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>{role}/{session}</Arn><AssumedRoleId>AROASIMULATOR:{session}</AssumedRoleId></AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""
_STS_ERROR = """<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Couldn't verify the web identity token</Message></Error>
  <RequestId>{request_id}</RequestId>
</ErrorResponse>"""


def error_response(
    status: int, name: str, message: str, request_id: str, headers: dict[str, str] | None = None
) -> Response:
    """An error as Bedrock sends it: its exception name in `x-amzn-ErrorType`, the message in the body."""
    return JSONResponse(
        {"message": message},
        status,
        {
            **(headers or {}),
            "x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/",
            "x-amzn-RequestId": request_id,
        },
    )


# ---------------------------------------------------------------------------------------------- event stream


def _header(name: str, value: str) -> bytes:
    encoded_name, encoded_value = name.encode(), value.encode()
    return (
        struct.pack("!B", len(encoded_name)) + encoded_name + struct.pack("!BH", 7, len(encoded_value)) + encoded_value
    )


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, CRC32 of both), headers (string
    values, type 7), payload, CRC32 of everything before it."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    prelude = struct.pack("!II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", binascii.crc32(body))


def chunk(event_json: bytes) -> bytes:
    """A `chunk` event carrying one Anthropic event."""
    payload = json.dumps({"bytes": base64.b64encode(event_json).decode()}).encode()
    return message({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}, payload)


def exception(name: str, text: str) -> bytes:
    """An in-stream exception (`throttlingException`, `modelStreamErrorException`, …)."""
    payload = json.dumps({"message": text}).encode()
    return message(
        {":exception-type": name, ":content-type": "application/json", ":message-type": "exception"}, payload
    )


def _event_of(frame: bytes) -> dict[str, Any]:
    """The JSON of an Anthropic SSE frame (`event: …\\ndata: {…}\\n\\n`)."""
    data = next(line for line in frame.decode().split("\n") if line.startswith("data: "))
    return json.loads(data[len("data: ") :])


def encode(scenario: s.Scenario, model: str) -> Iterator[bytes | s.Step]:
    """The scenario's Anthropic events as event-stream frames (and its cut steps as they are)."""
    name = _params(model).get("exception", "modelStreamErrorException")
    for item in anthropic.encode(scenario, model):
        if not isinstance(item, bytes):
            yield item
            continue
        event = _event_of(item)
        if event.get("type") == "error":
            yield exception(name, event["error"]["message"])
        else:
            yield chunk(json.dumps(event, ensure_ascii=False).encode())


def _invoke_body(body: Any) -> bool:
    """Whether `body` is an Anthropic InvokeModel body: `anthropic_version`, no `model` or `stream` (the path has them)."""
    return isinstance(body, dict) and "anthropic_version" in body and "model" not in body and "stream" not in body


def _params(model: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in model.split(";")[1:] if "=" in part)


def fault_frames(frames: list[bytes | s.Step], model: str) -> list[bytes | s.Step | "_Split"]:
    """`frames` with the model id's framing fault (`eventstream=…;at=…`) applied."""
    params = _params(model)
    fault = params.get("eventstream")
    if fault is None:
        return list(frames)
    at = min(int(params.get("at", "3")), len(frames) - 1)
    target = frames[at]
    assert isinstance(target, bytes), "at= must name a frame"
    head: list[bytes | s.Step | _Split] = list(frames[:at])
    if fault == "torn":
        return [*head, target[: len(target) // 2]]
    if fault == "split":
        return [*head, _Split(target), *frames[at + 1 :]]
    if fault == "bad_crc":
        return [*head, target[:-1] + bytes([target[-1] ^ 0xFF]), *frames[at + 1 :]]
    if fault == "bad_prelude_crc":
        return [*head, target[:11] + bytes([target[11] ^ 0xFF]) + target[12:], *frames[at + 1 :]]
    if fault == "huge_headers":
        prelude = struct.pack("!II", 12 + 200 * 1024 + 4, 200 * 1024)
        return [*head, prelude + struct.pack("!I", binascii.crc32(prelude)) + b"\0" * 64]
    if fault == "huge_payload":
        prelude = struct.pack("!II", 30 * 1024 * 1024, 0)
        return [*head, prelude + struct.pack("!I", binascii.crc32(prelude)) + b"\0" * 64]
    if fault == "bad_base64":
        bad = message(
            {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
            b'{"bytes": "!!not base64!!"}',
        )
        return [*head, bad, *frames[at + 1 :]]
    raise ValueError(f"unknown eventstream fault {fault!r}")


@dataclass
class _Split:
    """A frame sent one byte per write."""

    data: bytes


class EventStreamResponse:
    """Plays a scenario as an event-stream body, watching for the client closing the connection."""

    def __init__(self, scenario: s.Scenario, model: str, entry: Any, request_id: str) -> None:
        self.scenario, self.model, self.entry, self.request_id = scenario, model, entry, request_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = self.entry
        player = asyncio.current_task()
        watcher = asyncio.create_task(self._watch(receive, player))
        try:
            await self._play(send)
        except asyncio.CancelledError:
            if not entry.client_closed:
                raise
            player.uncancel()  # type: ignore[union-attr]
        finally:
            watcher.cancel()
            entry.finished_at = time.time()
            entry.touch()

    async def _watch(self, receive: Receive, player: asyncio.Task | None) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.entry.client_closed = True
        self.entry.closed_at = time.time()
        self.entry.touch()
        if player is not None:
            player.cancel()

    async def _play(self, send: Send) -> None:
        entry = self.entry
        if self.scenario.hang_before_headers:
            await asyncio.Event().wait()
        entry.status = 200
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", CONTENT_TYPE.encode()),
                    (b"x-amzn-requestid", self.request_id.encode()),
                    (b"x-amzn-bedrock-content-type", b"application/json"),
                ],
            }
        )
        delay = self.scenario.delay_ms / 1000
        for item in fault_frames(list(encode(self.scenario, self.model)), self.model):
            if isinstance(item, bytes):
                if delay and entry.frames_sent:
                    await asyncio.sleep(delay)
                await send({"type": "http.response.body", "body": item, "more_body": True})
                entry.frames_sent += 1
            elif isinstance(item, _Split):
                for offset in range(len(item.data)):
                    await send(
                        {"type": "http.response.body", "body": item.data[offset : offset + 1], "more_body": True}
                    )
                entry.frames_sent += 1
            elif isinstance(item, s.Truncate):
                break
            elif isinstance(item, s.Reset):
                raise ConnectionResetError("simulated connection reset")
            elif isinstance(item, s.Hang):
                await asyncio.Event().wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        entry.completed = True
