"""SigV4 signing per Bedrock request (`python -m bench.bedrock_signing`), in-process, no servers.

What `app.seams.bedrock.SigningBedrockClient` does for each request in a worker thread: freeze the credentials,
build botocore's `AWSRequest` and sign it (SHA-256 of a 4 KB body, the canonical request, the HMAC chain).
Prints the mean time per signature.
"""

from __future__ import annotations

import os
import time

N = 2000
URL = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
HEADERS = {
    "host": "bedrock-runtime.us-east-1.amazonaws.com",
    "content-type": "application/json",
    "accept": "application/json",
}


def main() -> None:
    os.environ.update(
        AWS_ACCESS_KEY_ID="ASIABENCHMARK0000001",
        AWS_SECRET_ACCESS_KEY="bench-secret-not-a-real-key",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    from app.seams.bedrock import SigningBedrockClient

    client = SigningBedrockClient(aws_region="us-east-1")
    body = b"x" * 4096
    client._sign("POST", URL, HEADERS, body)  # the chain is read once
    start = time.perf_counter()
    for _ in range(N):
        client._sign("POST", URL, HEADERS, body)
    print(f"SigV4 signing: {(time.perf_counter() - start) / N * 1e6:.0f} µs per request (4 KB body, mean of {N})")


if __name__ == "__main__":
    main()
