"""Stream one turn from the gateway with httpx and print it as it arrives.

    .venv/bin/python examples/stream.py "What's the weather in Paris?"
    .venv/bin/python examples/stream.py --model anthropic/tools "Weather in Paris?"      # demo gateway: tool calls
    GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... .venv/bin/python examples/stream.py "Hello"

It needs httpx, which the project's `.venv` has (`make run` or `make test` creates it); with another Python,
`pip install httpx` first.

Text is printed as it streams, a tool call when it is complete (`toolcall_end`, arguments parsed), then the
stop reason (`done`) or the error (`error`). Exit status: 0 done, 1 error event, 2 HTTP or connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Iterator

try:
    import httpx
except ModuleNotFoundError:
    sys.exit("examples/stream.py needs httpx: run it with the project's .venv/bin/python, or pip install httpx")

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-sent events to JSON objects: `data:` lines joined until a blank line; `event:`, `id:`, `:` ignored."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield json.loads("\n".join(data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="Hello! What can you do?")
    parser.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--model", default=os.environ.get("GATEWAY_MODEL", "anthropic/claude-sonnet-4-5"))
    parser.add_argument("--key", default=os.environ.get("GATEWAY_API_KEY"), help="client key (GATEWAY_API_KEY)")
    args = parser.parse_args()

    body = {
        "model": args.model,
        "context": {"messages": [{"role": "user", "content": args.prompt}], "tools": [WEATHER_TOOL]},
        "options": {"maxTokens": 1024},
    }
    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    # No read timeout: a stream may be silent for a while (the gateway sends `: ping` comments meanwhile).
    timeout = httpx.Timeout(10.0, read=None)
    try:
        with httpx.stream(
            "POST", f"{args.url.rstrip('/')}/v1/stream", json=body, headers=headers, timeout=timeout
        ) as response:
            if response.status_code != 200:
                response.read()
                print(f"HTTP {response.status_code}: {response.text}", file=sys.stderr)
                return 2
            return print_stream(response.iter_lines())
    except httpx.HTTPError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def print_stream(lines: Iterator[str]) -> int:
    """Print the events as they arrive; 0 when the turn ends in `done`, 1 on `error` or a cut stream."""
    for event in sse_events(lines):
        kind = event["type"]
        if kind == "start":
            print(f"[{event['provider']}/{event['model']} {event['requestId']}]", flush=True)
        elif kind == "text_delta":
            print(event["delta"], end="", flush=True)
        elif kind == "text_end":
            print(flush=True)
        elif kind == "toolcall_end":
            call = event["toolCall"]
            arguments = json.dumps(call["arguments"], separators=(",", ":"))
            print(f"tool call: {call['name']} {arguments} (id {call['id']})", flush=True)
        elif kind == "done":
            usage = event["usage"]
            print(f"done: {event['reason']} ({usage['totalTokens']} tokens, ${usage['cost']['total']:.6f})", flush=True)
            return 0
        elif kind == "error":
            print(f"\nerror: {event['reason']}: {event.get('errorMessage')}", flush=True)
            return 1
    print("error: the stream ended without a done or error event", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
