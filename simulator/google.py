"""Gemini streaming wire format (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`).

Framing as recorded from Gemini: `data: <json>\\r\\n\\r\\n`, no `event:` lines, no end sentinel. Every chunk
carries `usageMetadata` with the running counts. Rendering of the vendor-neutral steps:

- Usage → no chunk: it sets promptTokenCount (input + cache read) and cachedContentTokenCount
- TextBlock → one chunk per text piece; its signature rides on the block's last part (base64, as on the wire)
- ThinkingBlock → one `thought: true` part per piece, the signature on the last one
- RedactedThinking → an empty `thought: true` part with the data as thoughtSignature (Gemini has no redaction)
- ToolCallBlock → one `functionCall` part with the parsed args and no id (like Gemini 2.x; the step's id when
  it says `gemini_id`, like Gemini 3), its signature (if any) as the part's thoughtSignature; no args key when
  there are no fragments; fragments that do not parse cannot be sent on Gemini, so the model "fails" with
  finishReason MALFORMED_FUNCTION_CALL and the stream ends there
- Stop → finishReason on the last content chunk (or on a chunk of its own when nothing is waiting); a
  blocked prompt → a chunk without candidates whose `promptFeedback.blockReason` is SAFETY
- ErrorEvent → an `{"error": {code, message, status}}` chunk, which the SDK raises on
- UnknownEvent → a chunk with fields and a part kind no client knows
- WebSearch → `groundingMetadata` (`webSearchQueries`, `groundingChunks`, `searchEntryPoint`) on the finish chunk
"""

from __future__ import annotations

import base64
import json
from typing import Any, Iterator

from simulator import scenarios as s

ROUTE = "/google/v1beta/models/{model}:streamGenerateContent"
COUNT_ROUTE = "/google/v1beta/models/{model}:countTokens"
FINISH_REASONS = {
    "stop": "STOP",
    "toolUse": "STOP",
    "pause": "STOP",
    "length": "MAX_TOKENS",
    "safety": "SAFETY",
    "refusal": "SAFETY",
    "malformed_call": "MALFORMED_FUNCTION_CALL",
}
# Anthropic-style error types (the scenarios' vocabulary) as Google RPC statuses.
STATUSES = {
    "overloaded_error": (503, "UNAVAILABLE"),
    "api_error": (500, "INTERNAL"),
    "rate_limit_error": (429, "RESOURCE_EXHAUSTED"),
    "invalid_request_error": (400, "INVALID_ARGUMENT"),
    "authentication_error": (401, "UNAUTHENTICATED"),
    "permission_error": (403, "PERMISSION_DENIED"),
    "not_found_error": (404, "NOT_FOUND"),
}
HTTP_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def frame(data: dict[str, Any]) -> bytes:
    return f"data: {s.wire_json(data)}\r\n\r\n".encode()


def signature(raw: str) -> str:
    """Scenario signatures are plain names; on the wire a thoughtSignature is base64."""
    return base64.b64encode(raw.encode()).decode()


def prompt_of(body: dict[str, Any]) -> str:
    for content in reversed(body.get("contents") or []):
        if content.get("role", "user") == "user":
            texts = [
                p["text"] for p in content.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            if texts:
                return " ".join(texts)
    return ""


def tool_results_of(body: dict[str, Any]) -> list[str]:
    """The function responses of the last content, when it is a user turn that has them (their `output` or
    `error` text)."""
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    if not isinstance(last, dict) or last.get("role", "user") != "user":
        return []
    results = []
    for part in last.get("parts") or []:
        response = part.get("functionResponse") or part.get("function_response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            value = response.get("response") or {}
            results.append(str(value.get("output", value.get("error", ""))) if isinstance(value, dict) else str(value))
    return results


def request_error(scenario: s.Scenario, body: dict[str, Any]) -> s.HttpError | None:
    """What Gemini refuses in the request itself: a model that signs its calls (`Scenario.signed_calls`, as
    Gemini 3) wants every replayed call back with the signature it gave it. (Gemini also takes a documented
    placeholder; the simulator does not, so a lost signature shows.)"""
    if not scenario.signed_calls:
        return None
    wanted = signature(s.SIGNED_CALL_SIGNATURE)
    for index, content in enumerate(body.get("contents") or []):
        if not isinstance(content, dict) or content.get("role") != "model":
            continue
        for part in content.get("parts") or []:
            call = part.get("functionCall") if isinstance(part, dict) else None
            if call is not None and part.get("thoughtSignature") != wanted:
                return s.HttpError(400, "invalid_request_error", "Function call is missing a thought_signature in "
                                   f"functionCall parts: function call `{call.get('name')}`, content {index}")  # fmt: skip
    return None


def error_body(error: s.HttpError) -> dict[str, Any]:
    status = HTTP_STATUSES.get(error.status, STATUSES.get(error.type, (0, "UNKNOWN"))[1])
    body: dict[str, Any] = {"error": {"code": error.status, "message": error.message, "status": status}}
    if "retry-after" in error.headers:
        body["error"]["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{error.headers['retry-after']}s"}
        ]
    return body


class _Encoder:
    def __init__(self, model: str) -> None:
        self.model = model
        self.prompt = 0
        self.cached = 0
        self.candidates = 0
        self.thoughts = 0
        self.waiting: list[dict[str, Any]] | None = None  # parts of the last chunk, held for a finishReason
        self.grounding: dict[str, Any] | None = None  # a web search's `groundingMetadata`, sent with the finish

    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {"promptTokenCount": self.prompt}
        if self.candidates:
            usage["candidatesTokenCount"] = self.candidates
        usage["totalTokenCount"] = self.prompt + self.candidates + self.thoughts
        if self.cached:
            usage["cachedContentTokenCount"] = self.cached
        if self.thoughts:
            usage["thoughtsTokenCount"] = self.thoughts
        return usage

    def chunk(self, parts: list[dict[str, Any]] | None, finish: str | None = None, **extra: Any) -> bytes:
        candidate: dict[str, Any] = {}
        if parts is not None:
            candidate["content"] = {"parts": parts, "role": "model"}
        if finish:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        candidate.update(extra)
        return frame(
            {
                "candidates": [candidate],
                "usageMetadata": self.usage(),
                "modelVersion": self.model,
                "responseId": "sim-gemini-0001",
            }
        )

    def hold(self, parts: list[dict[str, Any]]) -> Iterator[bytes]:
        """Send what waits, then keep these parts back in case the next step is the finish."""
        yield from self.flush()
        self.waiting = parts

    def flush(self) -> Iterator[bytes]:
        if self.waiting is not None:
            parts, self.waiting = self.waiting, None
            yield self.chunk(parts)

    def finish(self, reason: str, output: int | None = None, message: str | None = None) -> bytes:
        parts, self.waiting = self.waiting, None
        if output:
            self.candidates = output
        extra: dict[str, Any] = {"finishMessage": message} if message else {}
        if self.grounding is not None:
            extra["groundingMetadata"] = self.grounding
        return self.chunk(parts if parts is not None else [{"text": ""}], reason, **extra)


def encode(scenario: s.Scenario, model: str, steps: list[s.Step] | None = None) -> Iterator[bytes | s.Step]:
    enc = _Encoder(model)
    for step in scenario.steps if steps is None else steps:
        if isinstance(step, s.Usage):
            enc.prompt = step.input + step.cache_read
            enc.cached = step.cache_read
        elif isinstance(step, (s.TextBlock, s.ThinkingBlock)):
            thought = isinstance(step, s.ThinkingBlock)
            for i, piece in enumerate(step.chunks):
                part: dict[str, Any] = {"text": piece}
                if thought:
                    part["thought"] = True
                    enc.thoughts += 1
                else:
                    enc.candidates += 1
                if step.signature and i == len(step.chunks) - 1:
                    part["thoughtSignature"] = signature(step.signature)
                yield from enc.hold([part])
        elif isinstance(step, s.RedactedThinking):
            yield from enc.hold([{"text": "", "thought": True, "thoughtSignature": signature(step.data)}])
        elif isinstance(step, s.ToolCallBlock) and step.cut:
            continue  # calls come whole: one the token limit cut is never sent
        elif isinstance(step, s.ToolCallBlock):
            call: dict[str, Any] = {"name": step.name}
            if step.gemini_id:
                call["id"] = step.id
            if step.fragments:
                try:
                    call["args"] = json.loads("".join(step.fragments))
                except ValueError:
                    yield from enc.flush()
                    yield enc.finish(
                        "MALFORMED_FUNCTION_CALL", message=f"Malformed function call: {''.join(step.fragments)}"
                    )
                    return
            enc.candidates += 5
            part = {"functionCall": call}
            if step.signature:
                part["thoughtSignature"] = signature(step.signature)
            yield from enc.hold([part])
        elif isinstance(step, s.WebSearch):  # grounding: what was searched and found rides on the last chunk
            enc.grounding = {
                "webSearchQueries": [step.query],
                "groundingChunks": [{"web": {"uri": url, "title": title}} for url, title in step.sources],
                "searchEntryPoint": {"renderedContent": "<div>simulated search chip</div>"},
            }
        elif isinstance(step, s.Stop) and step.reason == "blocked":
            yield from enc.flush()
            yield frame(
                {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": enc.usage(), "modelVersion": enc.model}
            )
        elif isinstance(step, s.Stop):
            yield enc.finish(FINISH_REASONS[step.reason], step.output)
        elif isinstance(step, s.ErrorEvent):
            yield from enc.flush()
            code, status = STATUSES.get(step.type, (500, "INTERNAL"))
            yield frame({"error": {"code": code, "message": step.message, "status": status}})
        elif isinstance(step, s.UnknownEvent):
            yield from enc.flush()
            yield enc.chunk([{"futurePart": {"anything": [1, 2, 3]}}], futureField={"x": 1})
        else:
            yield from enc.flush()
            yield step
    yield from enc.flush()
