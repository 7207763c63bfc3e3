// Requests: the key's recent records as a table, and one record's page.

import { getJson } from "/console/api.js";
import { $, clear, el, fmtCost, fmtMs, fmtTime, jsonTree } from "/console/dom.js";

export function initRequests() {
  $("#records-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    showRequests();
  });
  for (const id of ["#filter-outcome", "#filter-limit"]) $(id).addEventListener("change", showRequests);
}

function served(record) {
  return record.provider ? `${record.provider}/${record.model}` : "–";
}

export async function showRequests() {
  const params = new URLSearchParams({ limit: $("#filter-limit").value });
  if ($("#filter-outcome").value) params.set("outcome", $("#filter-outcome").value);
  if ($("#filter-model").value.trim()) params.set("model", $("#filter-model").value.trim());
  const tbody = clear($("#records tbody"));
  const status = $("#records-state");
  status.textContent = "loading…";
  let records;
  try {
    records = (await getJson(`/v1/requests?${params}`)).records;
  } catch (error) {
    status.textContent = error.message;
    return;
  }
  status.textContent = `${records.length} records`;
  for (const r of records) {
    const usage = r.usage || {};
    const link = `#/requests/${encodeURIComponent(r.requestId)}`;
    tbody.append(
      el(
        "tr",
        { class: "record-row", "data-id": r.requestId, onclick: () => (location.hash = link) },
        el("td", {}, el("a", { href: link }, fmtTime(r.createdAt))),
        el("td", {}, r.door ?? "–"),
        el("td", {}, r.requestedModel ?? "–"),
        el("td", {}, served(r)),
        el("td", {}, el("span", { class: `outcome outcome-${r.outcome}` }, r.outcome ?? "open")),
        el("td", { class: "num" }, fmtMs(r.ttftMs)),
        el("td", { class: "num" }, fmtMs(r.durationMs)),
        el("td", { class: "num" }, `${usage.input ?? "–"} / ${usage.output ?? "–"}`),
        el("td", { class: "num" }, fmtCost(usage.cost?.total)),
        el("td", { class: "num" }, (r.attempts || []).length),
      ),
    );
  }
}

export async function showRecord(id) {
  const root = clear($("#record"));
  let r;
  try {
    r = await getJson(`/v1/requests/${encodeURIComponent(id)}`);
  } catch (error) {
    root.append(el("p", { class: "error" }, error.message));
    return;
  }
  const usage = r.usage || {};
  const facts = [
    ["request id", r.requestId],
    ["created", fmtTime(r.createdAt)],
    ["settled", fmtTime(r.settledAt)],
    ["key", r.apiKeyId ?? "–"],
    ["door", r.door ?? "–"],
    ["requested", r.requestedModel],
    ["fallback", (r.fallback || []).join(", ") || "–"],
    ["served by", `${served(r)}${r.api ? ` (${r.api})` : ""}`],
    ["outcome", r.outcome],
    ["stop reason", r.stopReason ?? "–"],
    ["time to first token", `${fmtMs(r.ttftMs)} ms`],
    ["duration", `${fmtMs(r.durationMs)} ms`],
    ["tokens", `${usage.input ?? 0} in, ${usage.output ?? 0} out, ${usage.cacheRead ?? 0} cache read, ${usage.cacheWrite ?? 0} cache write`],
    ["cost", `$${fmtCost(usage.cost?.total)}`],
    ["frames", `${r.upstreamFrames ?? "–"} upstream → ${r.eventsSent ?? "–"} events sent`],
    ["client disconnected", r.clientDisconnected ? "yes" : "no"],
  ];
  root.append(
    el("h2", {}, "Request ", el("code", {}, r.requestId)),
    el("div", { class: "panel" }, el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", { class: k === "outcome" ? `outcome outcome-${v}` : "" }, v ?? "–")]))),
  );
  if (r.errorMessage) root.append(el("p", { class: "error record-error" }, r.errorMessage));
  root.append(
    el("h3", {}, "Attempts"),
    el(
      "div",
      { class: "panel" },
      el(
        "table",
        { class: "attempts" },
        el("thead", {}, el("tr", {}, ["#", "provider", "model", "api", "outcome", "HTTP", "took ms", "error"].map((h) => el("th", {}, h)))),
        el(
          "tbody",
          {},
          (r.attempts || []).map((a, i) =>
            el(
              "tr",
              {},
              el("td", { class: "num" }, i + 1),
              el("td", {}, a.provider),
              el("td", {}, a.model),
              el("td", {}, a.api ?? "–"),
              el("td", {}, el("span", { class: `outcome outcome-${a.outcome}` }, a.outcome ?? "–")),
              el("td", { class: "num" }, a.httpStatus ?? "–"),
              el("td", { class: "num" }, a.endedAt && a.startedAt ? fmtMs(a.endedAt - a.startedAt) : "–"),
              el("td", { class: "error" }, a.errorMessage ?? ""),
            ),
          ),
        ),
      ),
    ),
    el("h3", {}, "Message"),
    messageView(r.message),
    el("details", { class: "raw" }, el("summary", {}, "record JSON"), el("pre", {}, JSON.stringify(r, null, 2))),
  );
}

function messageView(message) {
  if (!message) return el("p", { class: "muted" }, "No message stored (content retention is off, or the turn produced none).");
  const blocks = (message.content || []).map((block) => {
    if (block.type === "text") return el("div", { class: "block block-text" }, el("span", { class: "role" }, "text"), el("pre", { class: "text" }, block.text));
    if (block.type === "thinking") return el("div", { class: "block block-thinking" }, el("span", { class: "role" }, block.redacted ? "thinking (redacted)" : "thinking"), el("pre", { class: "thinking" }, block.thinking));
    if (block.type === "toolCall")
      return el("div", { class: "block block-tool complete" }, el("span", { class: "role" }, "tool call"), el("span", { class: "tool-name" }, block.name), el("span", { class: "muted" }, ` ${block.id}`), el("div", { class: "tool-tree" }, jsonTree(block.arguments)));
    return el("pre", {}, JSON.stringify(block));
  });
  return el("div", { class: "panel assistant message" }, blocks.length ? blocks : el("p", { class: "muted" }, "(no content)"));
}
