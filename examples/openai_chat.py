"""Stream a chat completion through the gateway with the official `openai` SDK (the Chat Completions door).

    .venv/bin/python examples/openai_chat.py "What's the weather in Paris?"
    .venv/bin/python examples/openai_chat.py --model anthropic/tools "Weather in Paris?"   # demo gateway: tool calls
    GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... .venv/bin/python examples/openai_chat.py "Hello"

An application written for OpenAI changes two things to reach every vendor behind the gateway: `base_url`
(`<gateway>/v1`) and `api_key` (a gateway client key). The model is `<provider>/<model>`, a route or an alias.

Prints the serving model and the completion id, the text as it streams, each tool call when the stream ends
(its arguments assembled from the fragments), then the finish reason and the token count. Exit status: 0 the
completion finished, 1 it failed after it started (the SDK raises the error line), 2 HTTP or connection error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

try:
    import openai
except ModuleNotFoundError:
    sys.exit("examples/openai_chat.py needs the openai package: run it with the project's .venv/bin/python")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="?", default="Hello! What can you do?")
    parser.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--model", default=os.environ.get("GATEWAY_MODEL", "anthropic/claude-sonnet-4-5"))
    parser.add_argument(
        "--key", default=os.environ.get("GATEWAY_API_KEY") or "no-key", help="client key (GATEWAY_API_KEY)"
    )
    args = parser.parse_args()

    client = openai.OpenAI(base_url=f"{args.url.rstrip('/')}/v1", api_key=args.key, max_retries=0)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = None
    try:
        stream = client.chat.completions.create(
            model=args.model,
            messages=[{"role": "user", "content": args.prompt}],
            tools=[WEATHER_TOOL],
            max_completion_tokens=1024,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.role == "assistant":
                    print(f"[{chunk.model} {chunk.id}]", flush=True)
                if choice.delta.content:
                    print(choice.delta.content, end="", flush=True)
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] = call.id or entry["id"]
                    if call.function is not None:
                        entry["name"] = call.function.name or entry["name"]
                        entry["arguments"] += call.function.arguments or ""
                if choice.finish_reason is not None:
                    finish = choice.finish_reason
    except openai.APIStatusError as exc:  # refused before the answer started: an HTTP error status
        message = exc.body.get("message") if isinstance(exc.body, dict) else exc.message
        print(f"HTTP {exc.status_code}: {message}", file=sys.stderr)
        return 2
    except openai.APIConnectionError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except openai.APIError as exc:  # the completion failed after it started (an error line on the stream)
        print(f"\nerror: {exc.message}", flush=True)
        return 1
    print(flush=True)
    for index in sorted(calls):
        call = calls[index]
        arguments = json.dumps(json.loads(call["arguments"]), separators=(",", ":"))
        print(f"tool call: {call['name']} {arguments} (id {call['id']})", flush=True)
    tokens = f" ({usage.total_tokens} tokens)" if usage is not None else ""
    print(f"finish: {finish}{tokens}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
