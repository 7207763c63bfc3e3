"""What every cloud must do alike, parametrized by the cloud providers of this folder's gateways (conftest.py):
Azure OpenAI's four paths (Responses and Chat Completions, v1 and dated), Vertex AI's Claude and Gemini, and
Bedrock's Claude. A throttled request is retried and served, a client that leaves closes the cloud's stream, and
credentials that expire are renewed for the next turn while a stream opened with the old ones goes on. What only
one cloud has is in its own file (test_cloud_azure.py, test_cloud_vertex.py, test_bedrock.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import httpx
import pytest

from tests.conftest import marker, turn
from tests.providers.clouds.conftest import SERVED, azure_seen, record, vertex_seen


@dataclass(frozen=True)
class Route:
    """A cloud provider of this folder's gateways."""

    gateway: str  # the fixture of the gateway that serves it
    cloud: str  # the attempts' `cloud`
    seen: Callable[[Any, str, str], list[dict]]  # (simulator, model, prompt) → the requests the cloud received
    throttled: tuple[str, ...]  # what the throttled attempt's message carries of the cloud's answer
    tagged: bool = True  # the model carries the test's marker (`;t=<marker>`): the clouds that count by model
    leave_during: str = "slow;n=200;delay_ms=20"  # the scenario a client leaves in the middle of


def _by_model(seen: Callable[[Any, str], list[dict]]) -> Callable[[Any, str, str], list[dict]]:
    return lambda sim, model, prompt: seen(sim, model)


AZURE = Route("azure", "azure", _by_model(azure_seen), ("Azure request id",))
VERTEX = Route("vertex", "vertex", _by_model(vertex_seen), ("Resource exhausted",))
BEDROCK = Route(
    "bedrock",
    "bedrock",
    lambda sim, model, prompt: sim.seen(prompt),
    ("ThrottlingException: Too many requests", "(request id "),
    tagged=False,
    leave_during="hang-mid-stream",
)
ROUTES = {**{name: AZURE for name in SERVED}, "vx-claude": VERTEX, "vx-gemini": VERTEX, "bedrock": BEDROCK}


@pytest.mark.parametrize("provider", ROUTES)
def test_a_throttled_request_is_retried_then_served(request, provider):
    route = ROUTES[provider]
    gateway = request.getfixturevalue(route.gateway)
    m = marker()
    model = f"text;throttle=1;t={m}" if route.tagged else "text;throttle=1"
    result = gateway.stream(turn(f"{provider}/{model}", m))
    assert result.terminal["type"] == "done", result.text
    assert len(route.seen(gateway.sim, model, m)) == 2
    request_id = result.headers["x-request-id"]
    first, second = record(gateway, request_id)["attempts"]
    assert first["httpStatus"] == 429 and first["outcome"] == "error"
    for text in route.throttled:
        assert text in first["errorMessage"]
    assert second["outcome"] == "done" and second["cloud"] == route.cloud
    assert [a.kind for a in gateway.job(request_id).attempts][:1] == ["http"]


@pytest.mark.parametrize("provider", ROUTES)
def test_a_client_that_leaves_closes_the_cloud_stream(request, provider):
    route = ROUTES[provider]
    gateway = request.getfixturevalue(route.gateway)
    m = marker()
    body = turn(f"{provider}/{route.leave_during};t={m}" if route.tagged else f"{provider}/{route.leave_during}", m)
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=body) as response:  # leaves once content flows
            assert any(line.startswith("data:") and "text_delta" in line for line in response.iter_lines())
    entry = gateway.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and entry["completed"] is False


TOKENS = {  # a provider whose cloud's tokens the simulator issues already expired, and where it issues them
    "az-entra-expiry": ("entra", "/entra"),  # Microsoft Entra ID's managed identity (azure-identity)
    "vx-claude-expiry": ("vertex", "/vertex"),  # Google's token endpoint of the service account (google-auth)
    "vx-gemini-expiry": ("vertex", "/vertex"),
}


@pytest.mark.parametrize("provider", TOKENS)
def test_an_expired_token_is_renewed_for_the_next_turn_while_an_open_stream_goes_on(request, provider):
    """Tokens issued at their expiry (inside google-auth's refresh margin): the second turn, sent while the first
    still streams, gets a new token (renewed before its request, off the event loop) and the first stream,
    opened with the old one, ends done."""
    fixture, issuer = TOKENS[provider]
    gateway = request.getfixturevalue(fixture)
    sim = gateway.sim
    sim.http.post(f"{issuer}/_sim/lifetime", params={"seconds": 0})
    try:
        before = sim.http.get(f"{issuer}/_sim/issued").json()["issued"]
        first_marker, second_marker = marker(), marker()
        body = turn(f"{provider}/slow;n=40;delay_ms=10;t={first_marker}", first_marker)
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            with client.stream("POST", "/v1/stream", json=body) as response:
                lines = response.iter_lines()
                next(line for line in lines if "text_delta" in line)  # the first stream is open and streaming
                second = gateway.stream(turn(f"{provider}/text;t={second_marker}", second_marker))
                rest = list(lines)
        assert second.terminal["type"] == "done", second.text
        assert any('"type":"done"' in line.replace(" ", "") for line in rest)
        issued = sim.http.get(f"{issuer}/_sim/issued").json()["issued"] - before
        # azure-identity asks once per turn; google-auth may ask again for a token inside its margin
        assert issued == 2 if fixture == "entra" else issued >= 2
        [first_seen], [second_seen] = sim.seen(first_marker), sim.seen(second_marker)
        assert first_seen["authSha256"] != second_seen["authSha256"]  # the second turn went with a new token
        assert first_seen["completed"] is True
    finally:
        sim.http.post(f"{issuer}/_sim/lifetime", params={"seconds": 3600})
