// Health: the key's turns over the last minutes, from GET /v1/console/summary, drawn as small SVG charts.

import { getJson } from "/console/api.js";
import { $, clear, el, fmtMs, svg } from "/console/dom.js";
import { Poller } from "/console/poll.js";

const OUTCOMES = ["done", "error", "aborted", "interrupted"];
const REFRESH_MS = 5000;
const poller = new Poller(refresh, REFRESH_MS);

export function initHealth() {
  $("#health-minutes").addEventListener("change", refresh);
}

export function showHealth() {
  poller.start();
}

async function refresh() {
  const status = $("#health-state");
  let summary;
  try {
    summary = await getJson(`/v1/console/summary?minutes=${$("#health-minutes").value}`);
  } catch (error) {
    status.textContent = error.message;
    return;
  }
  status.textContent = `updated ${new Date(summary.now).toLocaleTimeString(undefined, { hour12: false })}, every ${REFRESH_MS / 1000} s`;
  render(summary);
}

function card(title, value, note) {
  return el("div", { class: "card" }, el("div", { class: "card-title" }, title), el("div", { class: "card-value" }, value), note ? el("div", { class: "muted" }, note) : null);
}

function pct(p) {
  return p.count ? `${fmtMs(p.p50)} / ${fmtMs(p.p90)} / ${fmtMs(p.p99)}` : "–";
}

function render(s) {
  const root = clear($("#health"));
  const total = OUTCOMES.reduce((n, o) => n + (s.turns[o] || 0), 0);
  root.append(
    el(
      "div",
      { class: "cards" },
      card("active streams", String(s.activeStreams)),
      card(`turns, last ${s.windowMinutes} min`, String(total), OUTCOMES.filter((o) => s.turns[o]).map((o) => `${o} ${s.turns[o]}`).join(" · ")),
      card("time to first token ms", pct(s.ttftMs), "p50 / p90 / p99"),
      card("gateway overhead ms", pct(s.overheadMs), "p50 / p90 / p99"),
    ),
    el(
      "div",
      { class: "charts" },
      chart("Turns per minute by outcome", stackedBars(s.minutes), legend(OUTCOMES.map((o) => [o, `outcome-fill-${o}`]))),
      chart("Time to first token per minute (ms)", lines(s.minutes, "ttftMs"), legend([["p50", "line-p50"], ["p90", "line-p90"]])),
      chart("Gateway overhead per minute (ms)", lines(s.minutes, "overheadMs"), legend([["p50", "line-p50"], ["p90", "line-p90"]])),
    ),
    providersTable(s),
  );
}

function chart(title, body, key) {
  return el("figure", { class: "chart" }, el("figcaption", {}, title), body, key);
}

function legend(items) {
  return el("div", { class: "legend" }, items.map(([label, cls]) => el("span", {}, svg("svg", { width: 10, height: 10, class: "swatch" }, svg("rect", { width: 10, height: 10, class: cls })), ` ${label}`)));
}

const W = 320;
const H = 120;
const PAD = { left: 34, right: 6, top: 8, bottom: 18 };

function frame(max, minutes) {
  const parts = [];
  const innerH = H - PAD.top - PAD.bottom;
  for (const fraction of [0, 0.5, 1]) {
    const y = PAD.top + innerH * (1 - fraction);
    parts.push(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y, y2: y, class: "grid" }));
    parts.push(svg("text", { x: PAD.left - 4, y: y + 3, class: "axis-label", "text-anchor": "end" }, formatTick(max * fraction)));
  }
  if (minutes.length) {
    const label = (m) => new Date(m.start).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hour12: false });
    parts.push(svg("text", { x: PAD.left, y: H - 4, class: "axis-label" }, label(minutes[0])));
    parts.push(svg("text", { x: W - PAD.right, y: H - 4, class: "axis-label", "text-anchor": "end" }, label(minutes[minutes.length - 1])));
  }
  return parts;
}

function formatTick(value) {
  return value >= 10 || value === 0 ? String(Math.round(value)) : value.toFixed(1);
}

function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value);
}

function stackedBars(minutes) {
  const totals = minutes.map((m) => OUTCOMES.reduce((n, o) => n + (m.turns[o] || 0), 0));
  const max = niceMax(Math.max(...totals, 1));
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const slot = innerW / Math.max(minutes.length, 1);
  const bars = [];
  minutes.forEach((m, i) => {
    let y = PAD.top + innerH;
    for (const outcome of OUTCOMES) {
      const count = m.turns[outcome] || 0;
      if (!count) continue;
      const h = (count / max) * innerH;
      y -= h;
      bars.push(svg("rect", { x: (PAD.left + i * slot + 1).toFixed(1), y: y.toFixed(1), width: Math.max(slot - 2, 1).toFixed(1), height: h.toFixed(1), class: `outcome-fill-${outcome}` }, svg("title", {}, `${outcome}: ${count}`)));
    }
  });
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img" }, ...frame(max, minutes), ...bars);
}

function lines(minutes, field) {
  const values = minutes.flatMap((m) => [m[field].p50, m[field].p90]).filter((v) => v !== null);
  const max = niceMax(Math.max(...values, 0));
  const innerW = W - PAD.left - PAD.right;
  const innerH = H - PAD.top - PAD.bottom;
  const slot = innerW / Math.max(minutes.length, 1);
  const series = [];
  for (const [key, cls] of [["p90", "line-p90"], ["p50", "line-p50"]]) {
    const points = [];
    minutes.forEach((m, i) => {
      const v = m[field][key];
      if (v === null) return;
      const x = PAD.left + (i + 0.5) * slot;
      const y = PAD.top + innerH * (1 - v / max);
      points.push([x, y, v]);
    });
    if (points.length > 1) series.push(svg("polyline", { points: points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "), class: cls }));
    for (const [x, y, v] of points) series.push(svg("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 2.5, class: cls }, svg("title", {}, `${key} ${fmtMs(v)} ms`)));
  }
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img" }, ...frame(max, minutes), ...series);
}

function spark(minutes, provider, field) {
  const counts = minutes.map((m) => m.providers[provider]?.[field] || 0);
  const max = Math.max(...counts, 1);
  const w = 120;
  const h = 20;
  const slot = w / Math.max(counts.length, 1);
  const bars = counts.map((c, i) => (c ? svg("rect", { x: (i * slot).toFixed(1), y: (h - (c / max) * h).toFixed(1), width: Math.max(slot - 1, 1).toFixed(1), height: ((c / max) * h).toFixed(1), class: `spark-${field}` }, svg("title", {}, `${c}`)) : null));
  return svg("svg", { viewBox: `0 0 ${w} ${h}`, width: w, height: h, class: "spark" }, svg("line", { x1: 0, x2: w, y1: h - 0.5, y2: h - 0.5, class: "grid" }), ...bars.filter(Boolean));
}

function providersTable(s) {
  const names = Object.keys(s.providers);
  const fields = ["turns", "errors", "retries", "fallbacks", "timeouts"];
  if (!names.length) return el("p", { class: "muted" }, "No turns in this window yet.");
  return el(
    "div",
    { class: "panel" },
    el("h3", {}, "By provider (fallbacks and timeouts count the attempts that left or timed out at that provider)"),
    el(
      "table",
      { class: "providers" },
      el("thead", {}, el("tr", {}, el("th", {}, "provider"), fields.map((f) => el("th", { class: "num" }, f)), el("th", {}, "fallbacks / min"), el("th", {}, "timeouts / min"))),
      el("tbody", {}, names.map((name) => el("tr", {}, el("td", {}, name), fields.map((f) => el("td", { class: "num" }, s.providers[name][f])), el("td", {}, spark(s.minutes, name, "fallbacks")), el("td", {}, spark(s.minutes, name, "timeouts"))))),
    ),
  );
}
