"""OpenAI Chat Completions streaming wire format (`POST /compat/v1/chat/completions`, `stream: true`).

Framing mirrors the recorded samples: `data: <chat.completion.chunk json>` + blank line, `data: [DONE]` at the
end. How the vendor-neutral steps render:

- `Usage` → the first chunk (`delta: {"role": "assistant", "content": ""}`); the counts go in a trailing
  `choices: []` usage chunk after the finish
- `TextBlock` → one `content` delta per chunk (`refusal` deltas in a scenario that stops with `refusal`)
- `ThinkingBlock` → `reasoning_content` deltas (or `reasoning`, quirk `reasoning_field=reasoning`)
- `RedactedThinking` → one `reasoning_details` entry of type `reasoning.encrypted` (OpenRouter's shape)
- `ToolCallBlock` → `tool_calls` fragments by `index`: the first with id, name and arguments `""`, then one per
  fragment; with `whole` set the complete arguments come in the first fragment
- `Stop` → a chunk with `finish_reason` (`stop`, `tool_calls`, `length`, safety and a blocked prompt → `content_filter`), then the
  usage chunk and `[DONE]`
- `ErrorEvent` → a `data: {"error": {...}}` frame, and the body ends
- `UnknownEvent` → a chunk with an object type and fields no client knows

Vendor quirks, chosen by model id parameters (`text;quirk=…`): `no_index` (Mistral: tool fragments without
`index`), `usage_twice` (Groq: usage in the finish chunk and again after), `usage_in_finish` (DeepSeek: usage only
in the finish chunk), `no_finish` (Snowflake: no finish_reason at all), `no_done` (no `[DONE]`),
`reasoning_field=reasoning` (Groq, OpenRouter: thinking in `reasoning`).
"""

from __future__ import annotations

from typing import Any, Iterator

from simulator import scenarios as s

ROUTE = "/compat/v1/chat/completions"
RESPONSE_ID = "chatcmpl-sim-0001"
FINISH = {
    "stop": "stop",
    "toolUse": "tool_calls",
    "length": "length",
    "safety": "content_filter",
    "blocked": "content_filter",
}


def frame(data: dict[str, Any] | str) -> bytes:
    body = data if isinstance(data, str) else s.wire_json(data)
    return f"data: {body}\n\n".encode()


def prompt_of(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text"]
            if texts:
                return " ".join(texts)
    return ""


def tool_results_of(body: dict[str, Any]) -> list[str]:
    """The contents of the `tool` messages that end the conversation."""
    results: list[str] = []
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        content = message.get("content")
        if not isinstance(content, str):
            content = "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
        results.insert(0, content)
    return results


def error_body(error: s.HttpError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": None}}


def _quirks(model: str) -> dict[str, str]:
    params = dict(p.split("=", 1) for p in model.split(";")[1:] if "=" in p)
    quirks = {q: "1" for q in params.get("quirk", "").split(",") if q}
    if "reasoning_field" in params:
        quirks["reasoning_field"] = params["reasoning_field"]
    return quirks


def encode(scenario: s.Scenario, model: str, steps: list[s.Step] | None = None) -> Iterator[bytes | s.Step]:
    steps = scenario.steps if steps is None else steps
    quirks = _quirks(model)
    name = model.split(";")[0]
    refusal = any(isinstance(step, s.Stop) and step.reason == "refusal" for step in steps)
    reasoning_key = quirks.get("reasoning_field", "reasoning_content")
    usage = s.Usage()
    call_index = 0

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return frame(
            {
                "id": RESPONSE_ID,
                "object": "chat.completion.chunk",
                "created": 1750000000,
                "model": name,
                "system_fingerprint": "fp_sim",
                "choices": choices,
                **extra,
            }
        )

    for step in steps:
        if isinstance(step, s.Usage):
            usage = step
            yield chunk({"role": "assistant", "content": ""})
        elif isinstance(step, s.TextBlock):
            for text in step.chunks:
                yield chunk({"refusal": text} if refusal else {"content": text})
        elif isinstance(step, s.ThinkingBlock):
            for text in step.chunks:
                yield chunk({"content": None, reasoning_key: text})
        elif isinstance(step, s.RedactedThinking):
            yield chunk(
                {"content": None, "reasoning_details": [{"type": "reasoning.encrypted", "data": step.data, "index": 0}]}
            )
        elif isinstance(step, s.ToolCallBlock):
            index = {} if quirks.get("no_index") else {"index": call_index}
            arguments = "".join(step.fragments)
            first = {
                **index,
                "id": step.id,
                "type": "function",
                "function": {"name": step.name, "arguments": arguments if step.whole else ""},
            }
            yield chunk({"tool_calls": [first]})
            if not step.whole:
                for fragment in step.fragments:
                    yield chunk({"tool_calls": [{**index, "function": {"arguments": fragment}}]})
            call_index += 1
        elif isinstance(step, s.Stop):
            prompt = usage.input + usage.cache_read
            tokens = {
                "prompt_tokens": prompt,
                "completion_tokens": step.output,
                "total_tokens": prompt + step.output,
                "prompt_tokens_details": {"cached_tokens": usage.cache_read},
                "completion_tokens_details": {"reasoning_tokens": 0},
            }
            finish = None if quirks.get("no_finish") else FINISH.get(step.reason, "stop")
            in_finish = {"usage": tokens} if quirks.get("usage_twice") or quirks.get("usage_in_finish") else {}
            yield chunk({}, finish, **in_finish)
            if not quirks.get("usage_in_finish"):
                yield chunk(None, usage=tokens)
            if not quirks.get("no_done"):
                yield frame("[DONE]")
        elif isinstance(step, s.ErrorEvent):
            yield frame({"error": {"message": step.message, "type": step.type, "code": step.type, "param": None}})
        elif isinstance(step, s.UnknownEvent):
            yield frame(
                {"id": RESPONSE_ID, "object": "chat.completion.future_thing", "detail": {"anything": [1, 2, 3]}}
            )
        else:
            yield step
