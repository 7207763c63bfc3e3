"""The SDK's Bedrock client with one private hook overridden, used by `app.providers.clouds.bedrock.claude`.

`AsyncAnthropicBedrock._prepare_request(request)` is where the Stainless client signs each request before it
is sent (the SDK's own Bedrock client signs there). It is overridden to sign with frozen credentials
(`SigningBedrockClient`); the public path has no other place to sign a request the SDK builds.

`AsyncAnthropicBedrock._prepare_options(options)` is where the SDK turns a Messages call into Bedrock's
InvokeModel request (`model` and `stream` out of the body into the path, `anthropic_version` and the
`anthropic-beta` flags into it). Token counting reads the body it makes (`invoke_body`), so a count is of the
very body a turn sends; the SDK has no counting call of its own for Bedrock.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, cast

import anthropic
import botocore.exceptions
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

__all__ = ["SigningBedrockClient"]


class SigningBedrockClient(anthropic.AsyncAnthropicBedrock):
    """The SDK's Bedrock client, signing each request with one frozen set of credentials from the provider's own
    botocore session.

    The SDK hands botocore's `SigV4Auth` the refreshable credentials object itself, whose `access_key`,
    `secret_key` and `token` each may refresh when read: a signature made while they are refreshed (another
    request's thread, or credentials within botocore's refresh window) can mix two sets, and the service refuses
    it. botocore's own clients sign with `get_frozen_credentials()`; so does this. The session (the chain) is
    the provider's, resolved on first use and again while it finds nothing, rather than the SDK's process-wide
    cached one."""

    _aws_session: Any = None
    _aws_credentials: Any = None

    async def invoke_body(self, options: Any) -> dict[str, Any]:
        """The InvokeModel JSON body the SDK makes of a turn's request options (`json_data` a Messages body)."""
        prepared = await self._prepare_options(options)
        return dict(cast(Mapping[str, Any], prepared.json_data))  # a Messages body: a JSON object

    async def post_signed_json(self, path: str, body: bytes) -> Any:
        """POST `body` (JSON bytes) to `path` under the runtime endpoint, signed like a turn (`_prepare_request`,
        frozen credentials); the answer's decoded JSON. An error answer raises the SDK's `APIStatusError`."""
        return await self.post(
            path, content=body, cast_to=object, options={"headers": {"Content-Type": "application/json"}}
        )

    async def _prepare_request(self, request: Any) -> None:
        if self.api_key is not None:  # the SDK's `AWS_BEARER_TOKEN_BEDROCK` (a Bedrock API key)
            return await super()._prepare_request(request)
        signed = await asyncio.to_thread(
            self._sign, request.method, str(request.url), dict(request.headers), request.read()
        )
        request.headers.update(signed)

    def _sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        if self._aws_credentials is None:
            if self._aws_session is None:
                self._aws_session = botocore.session.Session()
            self._aws_credentials = self._aws_session.get_credentials()
            if self._aws_credentials is None:
                raise botocore.exceptions.NoCredentialsError()
        aws = AWSRequest(
            method=method.upper(),
            url=url,
            data=body,
            headers={k: v for k, v in headers.items() if k.lower() != "connection"},
        )  # as the SDK signs
        SigV4Auth(self._aws_credentials.get_frozen_credentials(), "bedrock", self.aws_region).add_auth(aws)
        return {k: v for k, v in aws.prepare().headers.items() if v is not None}
