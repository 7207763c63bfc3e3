"""OpenAI Responses streaming wire format (`POST /v1/responses`, `stream: true`).

Framing mirrors the recorded samples: one `event: <type>` line and one `data: <json>` line per event, each
with a `sequence_number`. How the vendor-neutral steps render:

- `Usage` → `response.created`, `response.in_progress` (the counts go on the terminal event)
- `TextBlock` → a `message` item with one `output_text` part; in a scenario that stops with `refusal`
  the part is a `refusal` part (`response.refusal.delta` / `.done`) and the response still `completed`
- `ThinkingBlock` → a `reasoning` item with one summary part (summary deltas) and `encrypted_content`
  set to the step's signature; `RedactedThinking` → a reasoning item with encrypted content and no summary
- `ToolCallBlock` → a `function_call` item (item id `fc_<id>`, call id = the step's id) with one
  `function_call_arguments.delta` per fragment; with `whole="done"` the arguments come only in
  `function_call_arguments.done` and `output_item.done`, with `whole="item"` only in `output_item.done`
- `Stop` stop/toolUse/pause/malformed_call/refusal → `response.completed`; length → `response.incomplete`
  (reason `max_output_tokens`); safety and a blocked prompt → `response.incomplete` (reason `content_filter`)
- `ErrorEvent` → `response.failed` (with `response.error`) while no output item was sent, else an
  in-band `error` event
- `UnknownEvent` → an event type no client knows (`response.future_event`)
- `WebSearch` → a `web_search_call` item (`response.web_search_call.in_progress` / `.searching` /
  `.completed`; the finished item's `action` has the query and sources)
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

from simulator import scenarios as s

ROUTE = "/openai/v1/responses"
COUNT_ROUTE = "/openai/v1/responses/input_tokens"
RESPONSE_ID = "resp_sim_0001"
INCOMPLETE_REASONS = {"length": "max_output_tokens", "safety": "content_filter", "blocked": "content_filter"}


def frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {s.wire_json(data)}\n\n".encode()


def prompt_of(body: dict[str, Any]) -> str:
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "input_text"]
            if texts:
                return " ".join(texts)
    return ""


def tool_results_of(body: dict[str, Any]) -> list[str]:
    """The outputs of the `function_call_output` items that end the input (after its last other item)."""
    items = body.get("input")
    results: list[str] = []
    for item in reversed(items if isinstance(items, list) else []):
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            break
        output = item.get("output")
        if not isinstance(output, str):
            output = "".join(p.get("text", "") for p in output or [] if isinstance(p, dict))
        results.insert(0, output)
    return results


def error_body(error: s.HttpError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": None, "code": None}}


def _response(model: str, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": 1750000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "store": False,
        "temperature": 1.0,
        "tools": [],
        "usage": None,
        "metadata": {},
        **extra,
    }


def encode(scenario: s.Scenario, model: str, steps: list[s.Step] | None = None) -> Iterator[bytes | s.Step]:
    steps = scenario.steps if steps is None else steps
    refusal = any(isinstance(step, s.Stop) and step.reason == "refusal" for step in steps)
    sequence = itertools.count()
    output: list[dict[str, Any]] = []
    reasoning_tokens = 0  # one per summary chunk, as Gemini's simulator counts its thoughts
    usage = s.Usage()

    def event(type_: str, **data: Any) -> bytes:
        return frame(type_, {"type": type_, **data, "sequence_number": next(sequence)})

    for position, step in enumerate(steps):
        index = len(output)
        # A block followed by a failure is cut inside the block (no .done events), as real cuts are.
        cut_after = position + 1 < len(steps) and isinstance(
            steps[position + 1], (s.ErrorEvent, s.Truncate, s.Reset, s.Hang)
        )
        if isinstance(step, s.Usage):
            usage = step
            yield event("response.created", response=_response(model, "in_progress", []))
            yield event("response.in_progress", response=_response(model, "in_progress", []))
        elif isinstance(step, s.TextBlock):
            item_id = f"msg_sim_{index:04d}"
            text = "".join(step.chunks)
            kind, field = ("refusal", "refusal") if refusal else ("output_text", "text")
            empty = (
                {"type": kind, field: ""} if refusal else {"type": kind, "annotations": [], "logprobs": [], "text": ""}
            )
            full = {**empty, field: text}
            item: dict[str, Any] = {
                "id": item_id,
                "type": "message",
                "status": "completed",
                "content": [full],
                "role": "assistant",
            }
            ids = {"item_id": item_id, "output_index": index, "content_index": 0}
            yield event(
                "response.output_item.added", item={**item, "status": "in_progress", "content": []}, output_index=index
            )
            yield event("response.content_part.added", part=empty, **ids)
            for chunk in step.chunks:
                if refusal:
                    yield event("response.refusal.delta", delta=chunk, **ids)
                else:
                    yield event("response.output_text.delta", delta=chunk, logprobs=[], **ids)
            if cut_after:
                output.append(item)
                continue
            if refusal:
                yield event("response.refusal.done", refusal=text, **ids)
            else:
                yield event("response.output_text.done", text=text, logprobs=[], **ids)
            yield event("response.content_part.done", part=full, **ids)
            yield event("response.output_item.done", item=item, output_index=index)
            output.append(item)
        elif isinstance(step, (s.ThinkingBlock, s.RedactedThinking)):
            item_id = f"rs_sim_{index:04d}"
            thinking = step if isinstance(step, s.ThinkingBlock) else None
            encrypted = step.signature if isinstance(step, s.ThinkingBlock) else step.data
            added: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": encrypted}
            yield event("response.output_item.added", item=added, output_index=index)
            item = added
            if thinking is not None:
                text = "".join(thinking.chunks)
                ids = {"item_id": item_id, "output_index": index, "summary_index": 0}
                yield event("response.reasoning_summary_part.added", part={"type": "summary_text", "text": ""}, **ids)
                for chunk in thinking.chunks:
                    reasoning_tokens += 1
                    yield event("response.reasoning_summary_text.delta", delta=chunk, **ids)
                yield event("response.reasoning_summary_text.done", text=text, **ids)
                yield event("response.reasoning_summary_part.done", part={"type": "summary_text", "text": text}, **ids)
                item = {**added, "summary": [{"type": "summary_text", "text": text}]}
            yield event("response.output_item.done", item=item, output_index=index)
            output.append(item)
        elif isinstance(step, s.ToolCallBlock):
            item_id = f"fc_{step.id}"
            arguments = "".join(step.fragments)
            whole = step.whole
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "completed",
                "arguments": arguments,
                "call_id": step.id,
                "name": step.name,
            }
            ids = {"item_id": item_id, "output_index": index}
            yield event(
                "response.output_item.added",
                item={**item, "status": "in_progress", "arguments": ""},
                output_index=index,
            )
            if not whole:
                for fragment in step.fragments:
                    yield event("response.function_call_arguments.delta", delta=fragment, **ids)
            if step.cut:  # never finished: no arguments.done, no output_item.done
                output.append({**item, "status": "incomplete"})
                continue
            if whole != "item":
                yield event("response.function_call_arguments.done", arguments=arguments, **ids)
            yield event("response.output_item.done", item=item, output_index=index)
            output.append(item)
        elif isinstance(step, s.WebSearch):
            item_id = f"ws_sim_{index:04d}"
            ids = {"item_id": item_id, "output_index": index}
            yield event(
                "response.output_item.added",
                item={"id": item_id, "type": "web_search_call", "status": "in_progress"},
                output_index=index,
            )
            yield event("response.web_search_call.in_progress", **ids)
            yield event("response.web_search_call.searching", **ids)
            yield event("response.web_search_call.completed", **ids)
            action = {
                "type": "search",
                "query": step.query,
                "sources": [{"type": "url", "url": url} for url, _ in step.sources],
            }
            item = {"id": item_id, "type": "web_search_call", "status": "completed", "action": action}
            yield event("response.output_item.done", item=item, output_index=index)
            output.append(item)
        elif isinstance(step, s.Stop):
            tokens = {
                "input_tokens": usage.input + usage.cache_read,
                "input_tokens_details": {"cached_tokens": usage.cache_read},
                "output_tokens": step.output,
                "output_tokens_details": {"reasoning_tokens": min(reasoning_tokens, step.output)},
                "total_tokens": usage.input + usage.cache_read + step.output,
            }
            reason = INCOMPLETE_REASONS.get(step.reason)
            if reason is None:
                yield event("response.completed", response=_response(model, "completed", output, usage=tokens))
            else:
                yield event(
                    "response.incomplete",
                    response=_response(
                        model, "incomplete", output, usage=tokens, incomplete_details={"reason": reason}
                    ),
                )
        elif isinstance(step, s.ErrorEvent):
            if output:
                yield event("error", code=step.type, message=step.message, param=None)
            else:
                error = {"code": step.type, "message": step.message}
                yield event("response.failed", response=_response(model, "failed", output, error=error))
        elif isinstance(step, s.UnknownEvent):
            yield event("response.future_event", detail={"anything": [1, 2, 3]})
        else:
            yield step
