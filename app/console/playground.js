// Playground: send a turn to /v1/stream and watch its events arrive.

import { ApiError, getJson, postStream, sseFrames } from "/console/api.js";
import { $, clear, el, fmtCost, fmtMs, jsonTree, svg } from "/console/dom.js";

const EXAMPLE_TOOLS = [
  {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
  {
    name: "get_time",
    description: "Current time in a time zone",
    parameters: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
  },
];
const CONTENT_TYPES = new Set(["text_delta", "thinking_delta", "toolcall_delta", "text_start", "thinking_start", "toolcall_start"]);
const SLOW_GAP_MS = 250;

const state = {
  messages: [], // the conversation sent with the next turn (wire messages)
  pendingCalls: [], // tool calls of the last assistant message, answered with the next turn
  lastServed: null, // "provider/model" that served the previous turn
  controller: null,
};

export async function initPlayground() {
  $("#turn-form").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("#stop").addEventListener("click", () => state.controller?.abort());
  $("#reset").addEventListener("click", reset);
  $("#example-tool").addEventListener("click", () => {
    $("#tools").value = JSON.stringify(EXAMPLE_TOOLS, null, 2);
  });
  return await loadModels();
}

/** The model list; returns whether the gateway took the request's key (false: 401, null: another failure). */
export async function loadModels() {
  const list = clear($("#model-list"));
  try {
    const body = await getJson("/v1/models");
    for (const model of body.data || []) {
      const label = model.owned_by === "gateway" ? `route → ${model.route?.model ?? ""}` : model.name || model.api || "";
      list.append(el("option", { value: model.id }, label));
    }
    return true;
  } catch (error) {
    /* no key yet, or auth failed: the field still takes any model id */
    return error?.status === 401 ? false : null;
  }
}

function reset() {
  state.messages = [];
  state.pendingCalls = [];
  state.lastServed = null;
  clear($("#turns"));
  $("#empty-conversation").hidden = false;
  $("#tool-result-label").hidden = true;
  $("#compose-error").textContent = "";
}

function buildRequest() {
  const model = $("#model").value.trim();
  const text = $("#message").value;
  const toolsText = $("#tools").value.trim();
  let tools;
  if (toolsText) {
    try {
      tools = JSON.parse(toolsText);
    } catch (error) {
      throw new Error(`Tools are not valid JSON: ${error.message}`);
    }
    if (!Array.isArray(tools)) throw new Error("Tools must be a JSON array");
  }
  const messages = [...state.messages];
  if (state.pendingCalls.length) {
    const result = $("#tool-result").value;
    for (const call of state.pendingCalls) {
      messages.push({ role: "toolResult", toolCallId: call.id, toolName: call.name, content: [{ type: "text", text: result }] });
    }
  }
  const user = { role: "user", content: text, timestamp: Date.now() };
  messages.push(user);
  const fallback = $("#fallback").value.split(",").map((m) => m.trim()).filter(Boolean);
  const options = { partialArguments: true };
  if ($("#reasoning").value) options.reasoning = $("#reasoning").value;
  if ($("#throttle").value !== "") options.throttleMs = Number($("#throttle").value);
  const context = { messages };
  if ($("#system").value.trim()) context.systemPrompt = $("#system").value;
  if (tools) context.tools = tools;
  const body = { model, context, options };
  if (fallback.length) body.fallback = fallback;
  return { body, sent: messages };
}

async function send() {
  $("#compose-error").textContent = "";
  let request;
  try {
    request = buildRequest();
  } catch (error) {
    $("#compose-error").textContent = error.message;
    return;
  }
  const view = new TurnView(request.body.model, $("#message").value, state.lastServed);
  const timeline = new Timeline(request.body.options.throttleMs);
  state.controller = new AbortController();
  $("#send").disabled = true;
  $("#stop").disabled = false;
  let terminal = null;
  const started = performance.now();
  try {
    const response = await postStream(request.body, state.controller.signal);
    view.requestId(response.headers.get("X-Request-Id"));
    for await (const frame of sseFrames(response)) {
      const at = performance.now() - started;
      if (frame.data === null) {
        timeline.add(frame, null, at);
        continue;
      }
      const event = JSON.parse(frame.data);
      timeline.add(frame, event, at);
      view.apply(event);
      if (event.type === "done" || event.type === "error") terminal = event;
    }
    if (!terminal) view.failed("The stream ended without a terminal event.");
  } catch (error) {
    if (error.name === "AbortError") view.stopped(performance.now() - started);
    else view.failed(error instanceof ApiError ? `${error.status}: ${error.message}` : String(error.message || error));
  } finally {
    state.controller = null;
    $("#send").disabled = false;
    $("#stop").disabled = true;
    timeline.finish(performance.now() - started);
  }
  if (terminal && view.id) timeline.merged(view.id);
  if (terminal?.type === "done") {
    state.messages = [...request.sent, terminal.message];
    state.pendingCalls = terminal.message.content.filter((block) => block.type === "toolCall");
    state.lastServed = `${terminal.message.provider}/${terminal.message.model}`;
    $("#tool-result-label").hidden = state.pendingCalls.length === 0;
    $("#message").value = "";
  }
}

/** One turn in the conversation: the user's message and the assistant's blocks as they grow. */
class TurnView {
  constructor(model, userText, previousServed) {
    $("#empty-conversation").hidden = true;
    this.previousServed = previousServed;
    this.blocks = new Map();
    this.header = el("div", { class: "turn-head" }, el("span", { class: "badge" }, `requested ${model}`));
    this.body = el("div", { class: "assistant" });
    this.footer = el("div", { class: "turn-foot" }, el("span", { class: "muted" }, "waiting for the first event…"));
    this.root = el("li", { class: "turn" }, this.header, el("div", { class: "user" }, el("span", { class: "role" }, "user"), el("pre", { class: "text" }, userText)), this.body, this.footer);
    $("#turns").append(this.root);
    this.root.scrollIntoView({ block: "end" });
  }

  requestId(id) {
    this.id = id;
    if (id) this.header.append(el("a", { class: "request-link", href: `#/requests/${encodeURIComponent(id)}` }, id));
  }

  apply(event) {
    switch (event.type) {
      case "start": {
        const served = `${event.provider}/${event.model}`;
        this.header.append(el("span", { class: "badge served" }, `served by ${served} (${event.api})`));
        if (this.previousServed && this.previousServed !== served) {
          this.header.append(el("span", { class: "badge handoff" }, `handoff ${this.previousServed} → ${served}`));
        }
        clear(this.footer).append(el("span", { class: "muted" }, "streaming…"));
        break;
      }
      case "text_start":
      case "thinking_start": {
        const kind = event.type === "text_start" ? "text" : "thinking";
        const text = el("pre", { class: kind });
        const block = el("div", { class: `block block-${kind}` }, el("span", { class: "role" }, kind), text);
        this.blocks.set(event.contentIndex, { text, node: document.createTextNode("") });
        text.append(this.blocks.get(event.contentIndex).node);
        this.body.append(block);
        break;
      }
      case "text_delta":
      case "thinking_delta":
        this.blocks.get(event.contentIndex)?.node.appendData(event.delta);
        break;
      case "text_end":
      case "thinking_end": {
        const block = this.blocks.get(event.contentIndex);
        if (block && block.node.data !== event.content) block.node.data = event.content;
        break;
      }
      case "toolcall_start": {
        const tree = el("div", { class: "tool-tree" }, jsonTree({}));
        const raw = el("code", { class: "raw-args" });
        const node = el(
          "div",
          { class: "block block-tool" },
          el("span", { class: "role" }, "tool call"),
          el("span", { class: "tool-name" }, event.toolName),
          el("span", { class: "muted" }, ` ${event.id}`),
          tree,
          el("details", {}, el("summary", {}, "raw arguments"), raw),
        );
        this.blocks.set(event.contentIndex, { tree, raw, root: node });
        this.body.append(node);
        break;
      }
      case "toolcall_delta": {
        const block = this.blocks.get(event.contentIndex);
        if (!block) break;
        block.raw.append(document.createTextNode(event.delta));
        if ("partialArguments" in event) clear(block.tree).append(jsonTree(event.partialArguments));
        break;
      }
      case "toolcall_end": {
        const block = this.blocks.get(event.contentIndex);
        if (!block) break;
        clear(block.tree).append(jsonTree(event.toolCall.arguments));
        block.root.classList.add("complete");
        break;
      }
      case "done":
      case "error":
        this.terminal(event);
        break;
    }
  }

  terminal(event) {
    clear(this.footer);
    const usage = event.usage || {};
    const cost = usage.cost || {};
    const outcome = event.type === "done" ? `done: ${event.reason}` : `error: ${event.reason}`;
    this.footer.append(
      el("span", { class: `outcome outcome-${event.type === "done" ? "done" : event.reason}` }, outcome),
      el("span", { class: "error" }, event.errorMessage || ""),
      el(
        "table",
        { class: "usage" },
        el("tr", {}, ["input", "output", "cache read", "cache write", "total tokens", "cost $"].map((h) => el("th", {}, h))),
        el("tr", {}, [usage.input, usage.output, usage.cacheRead, usage.cacheWrite, usage.totalTokens].map((v) => el("td", { class: "num" }, v ?? "–")), el("td", { class: "num" }, fmtCost(cost.total))),
      ),
    );
  }

  stopped(ms) {
    clear(this.footer).append(el("span", { class: "outcome outcome-aborted" }, `stopped after ${fmtMs(ms)} ms`), el("span", { class: "muted" }, " — the gateway cancels the upstream and records the turn as aborted"));
  }

  failed(message) {
    clear(this.footer).append(el("span", { class: "outcome outcome-error" }, "failed"), el("span", { class: "error" }, message));
  }
}

/** The frames of the last turn: a strip chart of arrival times and a table with gaps. */
class Timeline {
  constructor(throttleMs) {
    this.throttleMs = throttleMs;
    this.rows = [];
    this.tbody = clear($("#frames tbody"));
    this.summary = $("#timeline-summary");
    this.summary.textContent = "streaming…";
    clear($("#timeline-chart"));
    for (const note of document.querySelectorAll(".timeline-panel .merged")) note.remove();
    this.previous = null;
    this.ttft = null;
    this.deltas = 0;
    this.chars = 0;
  }

  add(frame, event, at) {
    const type = event ? event.type : `: ${frame.comment}`;
    const gap = this.previous === null ? null : at - this.previous;
    this.previous = at;
    let detail = "";
    if (event) {
      if ("delta" in event) {
        detail = `${event.delta.length} chars`;
        this.deltas += 1;
        this.chars += event.delta.length;
      } else if (event.type === "start") detail = `${event.provider}/${event.model}`;
      else if (event.type === "toolcall_start") detail = event.toolName;
      else if (event.type === "done" || event.type === "error") detail = event.reason;
      if (this.ttft === null && CONTENT_TYPES.has(event.type)) {
        this.ttft = at;
        detail += " · first token";
      }
    }
    const classes = [gap !== null && gap >= SLOW_GAP_MS ? "slow" : "", event && "delta" in event ? "delta" : ""].join(" ");
    this.rows.push({ at, type });
    this.tbody.append(el("tr", { class: classes }, el("td", { class: "num" }, frame.id ?? ""), el("td", { class: "num" }, fmtMs(at)), el("td", { class: "num" }, gap === null ? "" : fmtMs(gap)), el("td", {}, type), el("td", {}, detail)));
  }

  finish(totalMs) {
    const parts = [`${this.rows.length} frames in ${fmtMs(totalMs)} ms`, `time to first token ${this.ttft === null ? "–" : fmtMs(this.ttft) + " ms"}`];
    if (this.deltas) {
      const mean = this.chars / this.deltas;
      const coalescing = this.throttleMs === 0 ? "coalescing off" : `coalescing ${this.throttleMs ?? "default"}${this.throttleMs ? " ms" : ""}`;
      parts.push(`${this.deltas} deltas, ${mean.toFixed(1)} chars each (${coalescing}: deltas arriving within the window are merged into one frame)`);
    }
    this.summary.textContent = parts.join(" · ");
    this.chart(totalMs);
  }

  /** From the turn's record: how many upstream frames became how many events (coalescing merges deltas). */
  async merged(requestId) {
    let record;
    try {
      record = await getJson(`/v1/requests/${encodeURIComponent(requestId)}`);
    } catch {
      return;
    }
    if (record.upstreamFrames == null || record.eventsSent == null) return;
    const note = el("div", { class: "merged" }, `${record.upstreamFrames} upstream frames → ${record.eventsSent} events sent`);
    if (record.upstreamFrames > record.eventsSent) note.append(` (coalescing merged or dropped ${record.upstreamFrames - record.eventsSent}; vendor frames without content, like pings and usage, are not events either)`);
    this.summary.after(note);
  }

  chart(totalMs) {
    const width = 600;
    const span = Math.max(totalMs, 1);
    const marks = this.rows.map(({ at, type }) => {
      const x = 10 + (at / span) * (width - 20);
      const kind = type.split("_")[0].replace(/^: .*/, "ping");
      return svg("line", { x1: x.toFixed(1), x2: x.toFixed(1), y1: 8, y2: 32, class: `mark mark-${kind}` }, svg("title", {}, `${type} at ${fmtMs(at)} ms`));
    });
    const axis = svg("line", { x1: 10, x2: width - 10, y1: 32, y2: 32, class: "axis" });
    const label = svg("text", { x: width - 10, y: 46, class: "axis-label", "text-anchor": "end" }, `${fmtMs(totalMs)} ms`);
    const zero = svg("text", { x: 10, y: 46, class: "axis-label" }, "0");
    const ttft = this.ttft === null ? [] : [svg("line", { x1: 10 + (this.ttft / span) * (width - 20), x2: 10 + (this.ttft / span) * (width - 20), y1: 2, y2: 36, class: "ttft" }, svg("title", {}, "first token"))];
    $("#timeline-chart").append(svg("svg", { viewBox: `0 0 ${width} 50`, class: "strip", role: "img", "aria-label": "frame arrival times" }, axis, ...ttft, ...marks, zero, label));
  }
}
