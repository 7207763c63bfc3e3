"""Encode normalized events as the OpenAI Responses stream (`event:` + `data:` frames, each with a
`sequence_number` counting from 0), and a settled turn as one `response` object.

    start                    → response.created, response.in_progress (the response `in_progress`, no output)
    text_start               → response.output_item.added (a `message` item) + response.content_part.added (`output_text`)
    text_delta               → response.output_text.delta
    text_end                 → response.output_text.done, response.content_part.done, response.output_item.done
    thinking_start           → response.output_item.added (a `reasoning` item)
    thinking_delta           → the first: response.reasoning_summary_part.added; each: response.reasoning_summary_text.delta
                               (raw reasoning, an `openai-completions` vendor: response.content_part.added with a
                               `reasoning_text` part, then response.reasoning_text.delta)
    thinking_end             → response.reasoning_summary_text.done + response.reasoning_summary_part.done (or
                               response.reasoning_text.done + response.content_part.done), response.output_item.done
                               with `encrypted_content` (origin-wrapped, `signatures.py`) when the request's
                               `include` asks for `reasoning.encrypted_content`
    toolcall_start           → response.output_item.added (a `function_call` item, `call_id` = the vendor's call id;
                               a function of a `namespace` tool group has its own `name` and the `namespace`)
    toolcall_delta           → response.function_call_arguments.delta
    toolcall_end             → response.function_call_arguments.done, response.output_item.done; a call signed on
                               its own (Gemini) is followed, with the `include`, by a `reasoning` item carrying
                               its signature (`gw1c.`, `signatures.py`), and later items' `output_index` move on
    websearch_start          → response.output_item.added (a `web_search_call` item), response.web_search_call.in_progress,
                               response.web_search_call.searching (only for a request with a hosted `web_search`)
    websearch_end            → response.web_search_call.completed, response.output_item.done (`action`: `search` with
                               the query; `sources` when `include` asks for `web_search_call.action.sources`)
    done                     → response.completed; `length` → response.incomplete (`incomplete_details.reason`
                               `max_output_tokens`)
    error                    → response.failed (`response.error` with the vendor's reason; items not finished
                               are `incomplete`). A cut stream is never `completed`.

A compaction request (`input` ending with a `compaction_trigger`, `compaction.py`) streams no block: its
first block sends response.output_item.added (a `compaction` item) and response.compaction.compacting, and
`done` sends response.output_item.done with the item, whose `encrypted_content` holds the model's text answer
(the summary), then response.completed with that one item as the output.

Every normalized block is one output item, so `output_index` is the block's `contentIndex` (plus the call
signature items before it); item ids are
`msg_` / `rs_` / `fc_` / `ws_` + `<requestId>_<index>`, the response id `resp_<requestId>`. The terminal event's
`response` carries the whole output, built from the turn's final (or partial) AssistantMessage, and usage in
OpenAI's sense (`input_tokens` includes cached tokens). An error before the stream starts is an HTTP error in
OpenAI's shape (`hold_until_start`), as OpenAI answers it.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import orjson

from app.contract.failures import Failure
from app.core.settled import SettledTurn
from app.doors.base import TurnView
from app.doors.openai_errors import FAILURE_TYPES, error_of
from app.doors.openai_responses.compaction import compaction_item
from app.doors.openai_responses.request import ResponsesRequest
from app.doors.openai_responses.signatures import wrap_reasoning
from app.doors.openai_responses.stored import response_id
from app.doors.signatures import Origin, origin_of, wrap_call

PING = b": ping\n\n"
RAW_REASONING_APIS = frozenset({"openai-completions"})  # vendors whose thinking is the raw reasoning, not a summary
# `response.error.code` (the SDK's closed set) for what ended the turn; anything else is a server error.
FAILED_CODES: dict[Failure | None, str] = {
    Failure.RATE_LIMITED: "rate_limit_exceeded",
    Failure.REFUSED: "invalid_prompt",
}
_PREFIX = {"text": "msg", "thinking": "rs", "toolCall": "fc", "compaction": "cmp", "webSearch": "ws"}
_BLOCK_EVENTS = ("text_start", "text_delta", "text_end", "thinking_start", "thinking_delta", "thinking_end",
                 "toolcall_start", "toolcall_delta", "toolcall_end")  # fmt: skip


def usage_of(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Unified usage in OpenAI's sense: `input_tokens` includes cached (read and written) tokens; reasoning
    tokens are part of `output_tokens`, counted in `reasoning_tokens` where the vendor counts them apart."""
    usage = usage or {}
    cached, written = usage.get("cacheRead", 0), usage.get("cacheWrite", 0)
    input_tokens = usage.get("input", 0) + cached + written
    output = usage.get("output", 0)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": usage.get("reasoning", 0)},
        "total_tokens": input_tokens + output,
    }


class ResponsesEncoder:
    """One request's encoder (see the module docstring)."""

    hold_until_start = True

    def __init__(self, request_id: str, request: ResponsesRequest, turn: TurnView | None = None) -> None:
        self.request_id = request_id
        self.response_id = response_id(request_id)
        self.created_at = int(time.time())
        self.model = request.client_model
        self._request = request
        self._turn = turn
        self._sequence = 0
        self._origin = Origin("", "", "")
        self._raw = False  # the serving vendor's thinking is raw reasoning text
        self._parts_open: set[int] = set()  # thinking blocks whose reasoning part was added
        self._arguments: dict[int, list[str]] = {}  # contentIndex → the argument fragments of an open call
        self._call_arguments: dict[int, str] = {}  # contentIndex → a finished call's arguments as streamed
        self._finished: set[int] = set()  # blocks whose item is done
        self._delta_heads: dict[int, tuple[bytes, bytes]] = {}  # contentIndex → its delta frames' constant parts
        # Items this door added before the current block (a call's own signature, `_toolcall_end`): an event's
        # `output_index` is the block's `contentIndex` plus this.
        self._shift = 0
        self._handlers: dict[str, Callable[[dict[str, Any]], bytes]] = {
            "start": self._start,
            "text_start": self._text_start,
            "text_delta": self._text_delta,
            "text_end": self._text_end,
            "thinking_start": self._thinking_start,
            "thinking_delta": self._thinking_delta,
            "thinking_end": self._thinking_end,
            "toolcall_start": self._toolcall_start,
            "toolcall_delta": self._toolcall_delta,
            "toolcall_end": self._toolcall_end,
            "websearch_start": self._websearch_start,
            "websearch_end": self._websearch_end,
            "done": self._done,
            "error": self._error,
        }
        if request.compaction:  # the blocks are the summary being written: one compaction item, at the end
            self._compacting = False
            self._handlers.update(dict.fromkeys(_BLOCK_EVENTS, self._compaction_progress))

    # ------------------------------------------------------------------------------------------ framing

    def _event(self, kind: str, data: dict[str, Any]) -> bytes:
        if self._shift and "output_index" in data:
            data["output_index"] += self._shift
        data["sequence_number"] = self._sequence
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"

    def _delta_frames(self, index: int, kind: str, ids: dict[str, Any], tail: bytes = b"") -> None:
        """Prepare the block's delta frames, `head + delta JSON + tail + sequence number`: what is the same for
        every delta of a block is encoded once, when the block starts (deltas are most of a stream's frames)."""
        fields = orjson.dumps({"type": kind, **ids, "output_index": ids["output_index"] + self._shift})
        self._delta_heads[index] = (b"event: " + kind.encode() + b"\ndata: " + fields[:-1] + b',"delta":', tail)

    def _delta(self, index: int, delta: str) -> bytes:
        head, tail = self._delta_heads[index]
        sequence = self._sequence
        self._sequence += 1
        return head + orjson.dumps(delta) + tail + b',"sequence_number":' + str(sequence).encode() + b"}\n\n"

    def _item_id(self, kind: str, index: int) -> str:
        return f"{_PREFIX[kind]}_{self.request_id}_{index}"

    def encode(self, event: dict[str, Any]) -> bytes:
        handler = self._handlers.get(event["type"])
        return handler(event) if handler is not None else b""

    def ping(self) -> bytes:
        return PING

    # ------------------------------------------------------------------------------------------ events

    def _start(self, event: dict[str, Any]) -> bytes:
        self._origin = origin_of(event)
        self._raw = self._origin.api in RAW_REASONING_APIS
        if event.get("provider") and event.get("model"):
            self.model = f"{event['provider']}/{event['model']}"
        response = self._response("in_progress", [])
        return self._event("response.created", {"response": response}) + self._event(
            "response.in_progress", {"response": response}
        )

    def _text_start(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        item_id = self._item_id("text", index)
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        part: dict[str, Any] = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        ids = {"item_id": item_id, "output_index": index, "content_index": 0}
        self._delta_frames(index, "response.output_text.delta", ids, b',"logprobs":[]')
        return self._event("response.output_item.added", {"output_index": index, "item": item}) + self._event(
            "response.content_part.added", {"item_id": item_id, "output_index": index, "content_index": 0, "part": part}
        )

    def _text_delta(self, event: dict[str, Any]) -> bytes:
        return self._delta(event["contentIndex"], event["delta"])

    def _text_end(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._finished.add(index)
        item_id = self._item_id("text", index)
        text = event.get("content") or ""
        part: dict[str, Any] = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        ids = {"item_id": item_id, "output_index": index, "content_index": 0}
        item = {"id": item_id, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
        return (
            self._event("response.output_text.done", {**ids, "text": text, "logprobs": []})
            + self._event("response.content_part.done", {**ids, "part": part})
            + self._event("response.output_item.done", {"output_index": index, "item": item})
        )

    def _thinking_start(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        item = {"id": self._item_id("thinking", index), "type": "reasoning", "summary": []}
        return self._event("response.output_item.added", {"output_index": index, "item": item})

    def _open_part(self, index: int) -> bytes:
        if index in self._parts_open:
            return b""
        self._parts_open.add(index)
        item_id = self._item_id("thinking", index)
        if self._raw:
            part = {"type": "reasoning_text", "text": ""}
            ids = {"item_id": item_id, "output_index": index, "content_index": 0}
            self._delta_frames(index, "response.reasoning_text.delta", ids)
            return self._event("response.content_part.added", {
                "item_id": item_id, "output_index": index, "content_index": 0, "part": part})  # fmt: skip
        part = {"type": "summary_text", "text": ""}
        ids = {"item_id": item_id, "output_index": index, "summary_index": 0}
        self._delta_frames(index, "response.reasoning_summary_text.delta", ids)
        return self._event("response.reasoning_summary_part.added", {
            "item_id": item_id, "output_index": index, "summary_index": 0, "part": part})  # fmt: skip

    def _thinking_delta(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        return self._open_part(index) + self._delta(index, event["delta"])

    def _thinking_end(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._finished.add(index)
        block = {"type": "thinking", "thinking": event.get("content") or "", "redacted": event.get("redacted"),
                 "thinkingSignature": event.get("contentSignature")}  # fmt: skip
        item_id = self._item_id("thinking", index)
        out = b""
        text = block["thinking"]
        if not block["redacted"] and (text or index in self._parts_open):
            out += self._open_part(index)
            if self._raw:
                ids = {"item_id": item_id, "output_index": index, "content_index": 0}
                out += self._event("response.reasoning_text.done", {**ids, "text": text})
                out += self._event(
                    "response.content_part.done", {**ids, "part": {"type": "reasoning_text", "text": text}}
                )
            else:
                ids = {"item_id": item_id, "output_index": index, "summary_index": 0}
                out += self._event("response.reasoning_summary_text.done", {**ids, "text": text})
                out += self._event(
                    "response.reasoning_summary_part.done", {**ids, "part": {"type": "summary_text", "text": text}}
                )
        item = self._reasoning_item(block, index, self._origin, self._raw, "completed")
        return out + self._event("response.output_item.done", {"output_index": index, "item": item})

    def _toolcall_start(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._arguments[index] = []
        ids = {"item_id": self._item_id("toolCall", index), "output_index": index}
        self._delta_frames(index, "response.function_call_arguments.delta", ids)
        item = {"id": self._item_id("toolCall", index), "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": event["id"], **self._name(event["toolName"])}  # fmt: skip
        return self._event("response.output_item.added", {"output_index": index, "item": item})

    def _toolcall_delta(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._arguments[index].append(event["delta"])
        return self._delta(index, event["delta"])

    def _toolcall_end(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._finished.add(index)
        call = event["toolCall"]
        arguments = "".join(self._arguments.pop(index, [])) or orjson.dumps(call["arguments"]).decode()
        self._call_arguments[index] = arguments
        item_id = self._item_id("toolCall", index)
        item = {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments,
                "call_id": call["id"], **self._name(call["name"])}  # fmt: skip
        out = self._event("response.function_call_arguments.done", {
            "item_id": item_id, "output_index": index, "arguments": arguments}) + self._event(
            "response.output_item.done", {"output_index": index, "item": item})  # fmt: skip
        signed = self._call_signature_item(call, index, self._origin, "completed")
        if signed is not None:  # a call signed on its own (Gemini): its item follows, later items move one on
            out += self._event(
                "response.output_item.added", {"output_index": index + 1, "item": {**signed, "status": "in_progress"}}
            )
            out += self._event("response.output_item.done", {"output_index": index + 1, "item": signed})
            self._shift += 1
        return out

    def _call_signature_item(
        self, call: dict[str, Any], index: int, origin: Origin, status: str, encrypted: bool = False
    ) -> dict[str, Any] | None:
        """The reasoning item that carries a function call's own signature (`signatures.py`, `gw1c.`), shown only
        with `include: ["reasoning.encrypted_content"]` (and always stored); None for a call without one."""
        if not call.get("thoughtSignature") or not (encrypted or self._request.include_encrypted_reasoning):
            return None
        return {"id": self._item_id("thinking", index), "type": "reasoning", "summary": [],
                "encrypted_content": wrap_call(origin, call["thoughtSignature"]), "status": status}  # fmt: skip

    def _websearch_start(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        item_id = self._item_id("webSearch", index)
        ids = {"item_id": item_id, "output_index": index}
        item = {"id": item_id, "type": "web_search_call", "status": "in_progress"}
        return (
            self._event("response.output_item.added", {"output_index": index, "item": item})
            + self._event("response.web_search_call.in_progress", dict(ids))
            + self._event("response.web_search_call.searching", ids)
        )

    def _websearch_end(self, event: dict[str, Any]) -> bytes:
        index = event["contentIndex"]
        self._finished.add(index)
        item = self._search_item(event["webSearch"], index, "completed")
        out = b""
        if item["status"] == "completed":
            out = self._event("response.web_search_call.completed", {"item_id": item["id"], "output_index": index})
        return out + self._event("response.output_item.done", {"output_index": index, "item": item})

    def _search_item(self, block: dict[str, Any], index: int, status: str) -> dict[str, Any]:
        """A `web_search_call` item: the vendor's search, its query, and its sources when `include` asks."""
        searched = block.get("status")
        item: dict[str, Any] = {"id": self._item_id("webSearch", index), "type": "web_search_call",
                                "status": searched if searched in ("completed", "failed") else status}  # fmt: skip
        action: dict[str, Any] = {"type": "search", "query": block.get("query") or ""}
        if self._request.include_search_sources:
            action["sources"] = [{"type": "url", "url": s["url"]} for s in block.get("sources") or ()]
        item["action"] = action
        return item

    def _compaction_progress(self, event: dict[str, Any]) -> bytes:
        if self._compacting:
            return b""
        self._compacting = True
        item_id = self._item_id("compaction", 0)
        item = {"id": item_id, "type": "compaction", "encrypted_content": ""}
        return self._event("response.output_item.added", {"output_index": 0, "item": item}) + self._event(
            "response.compaction.compacting", {"item_id": item_id, "output_index": 0}
        )

    def _done(self, event: dict[str, Any]) -> bytes:
        message = event.get("message") or {}
        response = self.response_of(message, event.get("usage") or message.get("usage"))
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        if self._request.compaction:
            opened = self._compaction_progress(event)
            self._finished.add(0)
            item = response["output"][0]
            return (
                opened
                + self._event("response.output_item.done", {"output_index": 0, "item": item})
                + self._event(kind, {"response": response})
            )
        return self._event(kind, {"response": response})

    def _error(self, event: dict[str, Any]) -> bytes:
        failure = self._turn.result().failure if self._turn is not None else None
        if failure is None and event.get("reason") == "aborted":
            failure = Failure.ABORTED
        message = event.get("message") or {}
        response = self._response(
            "failed",
            [] if self._request.compaction else self._output(message, open_status="incomplete"),
            usage=usage_of(event.get("usage") or message.get("usage")),
            error=failed_error(failure, event.get("errorMessage") or "error"),
        )
        return self._event("response.failed", {"response": response})

    # ------------------------------------------------------------------------------------------ objects

    def _response(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        echo = self._request.echo
        response = {
            "id": self.response_id, "object": "response", "created_at": self.created_at, "status": status,
            "background": False, "error": None, "incomplete_details": None, "instructions": echo.get("instructions"),
            "max_output_tokens": echo.get("max_output_tokens"), "model": self.model, "output": output,
            "parallel_tool_calls": echo.get("parallel_tool_calls", True), "previous_response_id": echo.get("previous_response_id"),
            "prompt_cache_key": echo.get("prompt_cache_key"), "reasoning": echo.get("reasoning"), "store": echo.get("store", False),
            "temperature": echo.get("temperature"), "text": echo.get("text"), "tool_choice": echo.get("tool_choice", "auto"),
            "tools": echo.get("tools", []), "top_p": echo.get("top_p"), "truncation": "disabled", "usage": None,
            "metadata": echo.get("metadata", {}),
        }  # fmt: skip
        response.update(extra)
        return response

    def response_of(self, message: dict[str, Any], usage: dict[str, Any] | None) -> dict[str, Any]:
        """The `response` object of a turn that settled `done` (completed, or incomplete at the token limit)."""
        if message.get("provider") and message.get("model"):
            self.model = f"{message['provider']}/{message['model']}"
        output = self._output(message, open_status="completed")
        if message.get("stopReason") == "length":
            return self._response(
                "incomplete", output, usage=usage_of(usage), incomplete_details={"reason": "max_output_tokens"}
            )
        return self._response("completed", output, usage=usage_of(usage), completed_at=int(time.time()))

    def stored_output(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The output items of a settled turn as they are stored for later requests: those the client got, with
        the reasoning state always (`encrypted_content`), so a later request on the same model replays it."""
        return self._output(message, open_status="completed", encrypted=True)

    def _output(self, message: dict[str, Any], *, open_status: str, encrypted: bool = False) -> list[dict[str, Any]]:
        """The message's blocks as output items; a block whose end was not seen while streaming has
        `open_status` (`incomplete` after a failure)."""
        if self._request.compaction:  # the text the model wrote is the summary
            summary = "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")
            return [compaction_item(self._item_id("compaction", 0), summary)]
        origin = origin_of(message) if message.get("api") else self._origin
        raw = origin.api in RAW_REASONING_APIS
        streamed = self._sequence > 0
        items = []
        for index, block in enumerate(message.get("content") or []):
            status = "completed" if not streamed or index in self._finished else open_status
            kind = block.get("type")
            if kind == "text":
                part = {"type": "output_text", "annotations": [], "logprobs": [], "text": block.get("text", "")}
                items.append({"id": self._item_id("text", index), "type": "message", "status": status,
                              "content": [part], "role": "assistant"})  # fmt: skip
            elif kind == "thinking":
                items.append(self._reasoning_item(block, index, origin, raw, status, encrypted))
            elif kind == "toolCall":
                items.append({"id": self._item_id("toolCall", index), "type": "function_call", "status": status,
                              "arguments": self._call_arguments.get(index) or orjson.dumps(block.get("arguments") or {}).decode(),
                              "call_id": block["id"], **self._name(block["name"])})  # fmt: skip
                if (signed := self._call_signature_item(block, index, origin, status, encrypted)) is not None:
                    items.append(signed)
            elif kind == "webSearch":
                items.append(self._search_item(block, index, status))
        return items

    def _name(self, name: str) -> dict[str, str]:
        """A function_call item's `name`, with its `namespace` when it is a function of a namespace group."""
        namespaced = self._request.namespaced.get(name)
        return {"name": name} if namespaced is None else {"name": namespaced[1], "namespace": namespaced[0]}

    def _reasoning_item(
        self, block: dict[str, Any], index: int, origin: Origin, raw: bool, status: str, encrypted: bool = False
    ) -> dict[str, Any]:
        text = block.get("thinking") or ""
        redacted = bool(block.get("redacted"))
        item: dict[str, Any] = {"id": self._item_id("thinking", index), "type": "reasoning", "summary": []}
        if text and not redacted:
            if raw:
                item["content"] = [{"type": "reasoning_text", "text": text}]
            else:
                item["summary"] = [{"type": "summary_text", "text": text}]
        if encrypted or self._request.include_encrypted_reasoning:
            item["encrypted_content"] = wrap_reasoning(origin, block.get("thinkingSignature"), redacted=redacted)
        item["status"] = status
        return item

    # ------------------------------------------------------------------------------------------ answers

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        """The `response` object, or OpenAI's error shape with the status of the failure."""
        if result.outcome != "done":
            return result.status, {"error": error_of(result.failure, result.error_message)}
        response = self.response_of(result.message, result.message.get("usage"))
        if self._request.compacted is not None:  # POST /v1/responses/compact: OpenAI's compacted response
            return 200, {"id": self.response_id, "object": "response.compaction", "created_at": self.created_at,
                         "output": [*self._request.compacted, *response["output"]], "usage": response["usage"]}  # fmt: skip
        return 200, response

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return result.status, {"error": error_of(result.failure, result.error_message)}


def failed_error(failure: Failure | None, message: str) -> dict[str, Any]:
    """`response.error` of a failed turn: a code of the API's closed set and the vendor's reason; `type` is the
    kind an error in OpenAI's shape gives the same failure (`timeout_error`, `server_error`, …)."""
    type_, _ = FAILURE_TYPES[failure]
    return {"code": FAILED_CODES.get(failure, "server_error"), "message": message, "type": type_}
