// Sessions: agent sessions, most recently active first, with their totals (GET /v1/sessions); one session's
// timeline (GET /v1/sessions/<id>): every turn across doors and vendors in order, drawn as bars on the
// session's clock, then each turn's model, provider, tools, tokens, cache-read share, cost, duration and outcome.

import { adminJson } from "/console/api.js";
import { $, clear, el, fmtCost, fmtMs, svg } from "/console/dom.js";

export function initSessions() {
  $("#sessions-refresh").addEventListener("click", showSessions);
}

function when(epochMs) {
  return epochMs ? new Date(epochMs).toLocaleString(undefined, { hour12: false }) : "–";
}

function percent(share) {
  return `${Math.round(share * 100)} %`;
}

export async function showSessions() {
  const status = $("#sessions-state");
  let listed;
  try {
    listed = await adminJson("/v1/sessions?limit=200");
  } catch (error) {
    status.textContent = error.message;
    clear($("#sessions tbody"));
    return;
  }
  status.textContent = `${listed.sessions.length} sessions in the last 30 days`;
  clear($("#sessions tbody")).append(...listed.sessions.map(sessionRow));
}

function sessionRow(s) {
  const open = () => {
    location.hash = `#/sessions/${encodeURIComponent(s.session)}`;
  };
  return el(
    "tr",
    { "data-session": s.session, onclick: open },
    el("td", {}, el("code", {}, s.session)),
    el("td", {}, when(s.lastAt)),
    el("td", { class: "num" }, String(s.turns)),
    el("td", {}, s.models.join(", ")),
    el("td", {}, s.keys.join(", ")),
    el("td", { class: "num" }, fmtCost(s.costUsd)),
    el("td", { class: "num" }, percent(s.cacheReadShare)),
    el("td", { class: "num" }, String(s.errors)),
  );
}

export async function showSession(id) {
  const root = clear($("#session"));
  let view;
  try {
    view = await adminJson(`/v1/sessions/${encodeURIComponent(id)}`);
  } catch (error) {
    root.append(el("p", { class: "error" }, error.message));
    return;
  }
  const t = view.totals;
  root.append(
    el("h2", {}, "Session ", el("code", {}, view.session)),
    el(
      "div",
      { class: "cards session-totals" },
      card("cost $", fmtCost(t.costUsd)),
      card("turns", String(t.turns)),
      card("tokens in / out", `${t.inputTokens} / ${t.outputTokens}`),
      card("cache read", percent(t.cacheReadShare)),
      card("turn time", `${fmtMs(t.durationMs / 1000)} s`),
      card("errors", String(t.errors)),
    ),
    el("div", { class: "panel" }, el("h3", {}, "Timeline"), timeline(view.turns)),
    el("div", { class: "panel" }, turnsTable(view.turns)),
  );
}

function card(title, value) {
  return el("div", { class: "card" }, el("div", { class: "card-title" }, title), el("div", { class: "card-value" }, value));
}

/** The turns as bars on the session's clock: from each turn's start, as long as it took, coloured by outcome. */
function timeline(turns) {
  const width = 800;
  const row = 18;
  const left = 200;
  const start = Math.min(...turns.map((t) => t.createdAt));
  const end = Math.max(...turns.map((t) => t.createdAt + (t.durationMs || 0)));
  const span = Math.max(1, end - start);
  const x = (ms) => left + ((ms - start) / span) * (width - left - 10);
  const height = turns.length * row + 20;
  return svg(
    "svg",
    { class: "chart-svg session-timeline", viewBox: `0 0 ${width} ${height}`, role: "img" },
    turns.map((t, i) => {
      const y = i * row + 4;
      const x0 = x(t.createdAt);
      const w = Math.max(2, x(t.createdAt + (t.durationMs || 0)) - x0);
      return svg(
        "g",
        { class: "timeline-turn", "data-request": t.requestId },
        svg("text", { class: "axis-label", x: 0, y: y + 11 }, `${i + 1}. ${t.provider || "?"}/${t.model || t.requestedModel}`),
        svg(
          "rect",
          { class: `outcome-fill-${t.outcome}`, x: x0.toFixed(1), y, width: w.toFixed(1), height: row - 6 },
          svg("title", {}, `${t.outcome}, ${fmtMs(t.durationMs)} ms, $${fmtCost(t.costUsd)}`),
        ),
      );
    }),
    svg("text", { class: "axis-label", x: left, y: height - 4 }, "0 s"),
    svg("text", { class: "axis-label", x: width - 10, y: height - 4, "text-anchor": "end" }, `${fmtMs(span / 1000)} s`),
  );
}

function turnsTable(turns) {
  return el(
    "table",
    { class: "session-turns" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ["#", "time", "door", "key", "model", "provider", "tools"].map((h) => el("th", {}, h)),
        ["tokens in / out", "cache read", "cost $", "duration ms"].map((h) => el("th", { class: "num" }, h)),
        el("th", {}, "outcome"),
      ),
    ),
    el(
      "tbody",
      {},
      turns.map((t, i) =>
        el(
          "tr",
          { "data-request": t.requestId },
          el("td", {}, String(i + 1)),
          el("td", {}, el("a", { href: `#/requests/${encodeURIComponent(t.requestId)}` }, when(t.createdAt))),
          el("td", {}, t.door || "–"),
          el("td", {}, t.key || "–"),
          el("td", {}, t.model || t.requestedModel || "–"),
          el("td", {}, t.provider || "–"),
          el("td", {}, t.toolCalls === null ? "–" : t.toolCalls.join(", ")),
          el("td", { class: "num" }, `${t.inputTokens} / ${t.outputTokens}`),
          el("td", { class: "num" }, percent(t.cacheReadShare)),
          el("td", { class: "num" }, fmtCost(t.costUsd)),
          el("td", { class: "num" }, fmtMs(t.durationMs)),
          el("td", { class: `outcome outcome-${t.outcome}` }, t.outcome + (t.stopReason ? `: ${t.stopReason}` : "")),
        ),
      ),
    ),
  );
}
