"""Talk to the gateway with the official `anthropic` SDK: only the base URL and the key change.

    .venv/bin/python examples/anthropic_messages.py "What's the weather in Paris?"
    .venv/bin/python examples/anthropic_messages.py --model anthropic/tools "Weather in Paris?"     # demo gateway: tool calls
    .venv/bin/python examples/anthropic_messages.py --model openai/gpt-5-mini --thinking "Why is the sky blue?"
    GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... .venv/bin/python examples/anthropic_messages.py "Hello"

Streams one turn with `client.messages.stream`: text is printed as it streams; thinking (with --thinking)
and tool calls once their block is complete, on lines starting with `thinking: ` and `tool call: `; then the
stop reason and the usage. Any model the gateway serves works (`<provider>/<model>`, a route, an alias),
whatever vendor is behind it. With --thinking the reply goes back in a second turn, signed thinking
included, as an agent loop would.
Exit status: 0 done, 1 error after the stream started, 2 HTTP or connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

try:
    import anthropic
except ModuleNotFoundError:
    sys.exit("examples/anthropic_messages.py needs the anthropic package: run it with the project's .venv/bin/python")

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def stream_turn(client: anthropic.Anthropic, args: argparse.Namespace, messages: list[dict[str, Any]]) -> Any:
    """One streamed turn, printed as it arrives; returns the final message."""
    params: dict[str, Any] = {"model": args.model, "max_tokens": 4096, "messages": messages, "tools": [WEATHER_TOOL]}
    if args.thinking:
        params["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    with client.messages.stream(**params) as stream:
        for event in stream:
            if event.type == "message_start":
                print(f"[{event.message.model} {event.message.id}]", flush=True)
            elif event.type == "text":
                print(event.text, end="", flush=True)
            elif event.type == "content_block_stop":
                block = event.content_block
                if block.type == "text":
                    print(flush=True)
                elif block.type == "thinking":
                    print(f"thinking: {block.thinking}", flush=True)
                elif block.type == "tool_use":
                    arguments = json.dumps(block.input, separators=(",", ":"), ensure_ascii=False)
                    print(f"tool call: {block.name} {arguments} (id {block.id})", flush=True)
        final = stream.get_final_message()
    usage = final.usage
    print(
        f"done: {final.stop_reason} ({usage.input_tokens} input, {usage.output_tokens} output, "
        f"{usage.cache_read_input_tokens or 0} cache read tokens)",
        flush=True,
    )
    return final


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="Hello! What can you do?")
    parser.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--model", default=os.environ.get("GATEWAY_MODEL", "anthropic/claude-sonnet-4-5"))
    parser.add_argument(
        "--key", default=os.environ.get("GATEWAY_API_KEY") or "none", help="client key (GATEWAY_API_KEY)"
    )
    parser.add_argument("--thinking", action="store_true", help="ask for reasoning, then send it back in a second turn")
    args = parser.parse_args()

    # The SDK sends the key as `x-api-key`, which the gateway accepts like `Authorization: Bearer`.
    client = anthropic.Anthropic(base_url=args.url, api_key=args.key, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": args.prompt}]
    try:
        final = stream_turn(client, args, messages)
        if args.thinking and final.stop_reason != "tool_use":
            # The assistant content goes back as it came, thinking signatures included: on the same model the
            # vendor gets its own signature back and keeps its reasoning.
            messages += [
                {"role": "assistant", "content": final.content},
                {"role": "user", "content": "Thanks. Anything to add?"},
            ]
            stream_turn(client, args, messages)
    except anthropic.APIStatusError as exc:
        error = exc.body.get("error", {}) if isinstance(exc.body, dict) else {}
        if exc.response.status_code == 200:  # an `event: error` after the stream started
            print(f"\nerror: {error.get('type')}: {error.get('message')}", flush=True)
            return 1
        print(
            f"HTTP {exc.status_code}: {error.get('message') or exc.message}", file=sys.stderr
        )  # refused before the start
        return 2
    except anthropic.APIConnectionError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
