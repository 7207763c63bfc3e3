// Spend: what was spent (USD) over the last 1, 7 or 30 days, as bars per UTC day and as bars per the chosen
// group (key, team, user, tag, model, provider, session), with the figures in a table and the same report as
// CSV (GET /v1/spend?format=csv, fetched with the admin key and offered as a download).

import { adminJson, adminText } from "/console/api.js";
import { $, clear, el, fmtCost, svg } from "/console/dom.js";

const DAY_MS = 86_400_000;
let csvUrl = null;

export function initSpend() {
  $("#spend-form").addEventListener("submit", (event) => {
    event.preventDefault();
    showSpend();
  });
  $("#spend-group").addEventListener("change", showSpend);
  $("#spend-days").addEventListener("change", showSpend);
}

export async function showSpend() {
  const status = $("#spend-state");
  const groupBy = $("#spend-group").value;
  const days = Number($("#spend-days").value);
  const to = Date.now() + 1;
  const from = to - days * DAY_MS;
  const query = `from=${from}&to=${to}`;
  let byDay, byGroup, csv;
  try {
    [byDay, byGroup, csv] = await Promise.all([
      adminJson(`/v1/spend?groupBy=day&${query}`),
      adminJson(`/v1/spend?groupBy=${groupBy}&${query}`),
      adminText(`/v1/spend?groupBy=${groupBy}&${query}&format=csv`),
    ]);
  } catch (error) {
    status.textContent = error.message;
    clear($("#spend"));
    $("#spend-csv").hidden = true;
    return;
  }
  status.textContent = `$${fmtCost(byGroup.total.costUsd)} over ${byGroup.total.turns} turns`;
  offerCsv(csv, groupBy);
  const perDay = dayRows(byDay, from, days);
  clear($("#spend")).append(
    el(
      "div",
      { class: "charts" },
      figure("Spend per UTC day ($)", "spend-by-day", columns(perDay)),
      figure(`Spend per ${groupBy} ($)`, "spend-by-group", bars(byGroup.groups)),
    ),
    el("div", { class: "panel" }, table(byGroup)),
  );
}

function offerCsv(text, groupBy) {
  if (csvUrl) URL.revokeObjectURL(csvUrl);
  csvUrl = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  const link = $("#spend-csv");
  link.href = csvUrl;
  link.download = `spend-by-${groupBy}.csv`;
  link.hidden = false;
}

/** Every day of the range, those without a turn at 0, oldest first. */
function dayRows(report, from, days) {
  const spent = new Map(report.groups.map((row) => [row.group, row.costUsd]));
  const rows = [];
  for (let i = 0; i <= days; i++) {
    const day = new Date(from + i * DAY_MS).toISOString().slice(0, 10);
    if (!rows.length || rows[rows.length - 1].group !== day) rows.push({ group: day, costUsd: spent.get(day) || 0 });
  }
  return rows;
}

function figure(title, cls, chart) {
  return el("figure", { class: `chart ${cls}` }, el("figcaption", {}, title), chart);
}

function label(group) {
  return group === null ? "(none)" : String(group);
}

/** Vertical bars, one per day. */
function columns(rows) {
  const width = 600;
  const height = 180;
  const bottom = 20;
  const max = Math.max(...rows.map((r) => r.costUsd), 0) || 1;
  const step = width / rows.length;
  return svg(
    "svg",
    { class: "chart-svg", viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("line", { class: "axis", x1: 0, y1: height - bottom, x2: width, y2: height - bottom }),
    rows.map((r, i) => {
      const h = (r.costUsd / max) * (height - bottom - 16);
      return svg(
        "rect",
        {
          class: "spend-bar",
          "data-group": r.group,
          "data-cost": r.costUsd,
          x: (i * step + step * 0.15).toFixed(1),
          y: (height - bottom - h).toFixed(1),
          width: (step * 0.7).toFixed(1),
          height: h.toFixed(1),
        },
        svg("title", {}, `${r.group}: $${fmtCost(r.costUsd)}`),
      );
    }),
    svg("text", { class: "axis-label", x: 0, y: height - 4 }, rows[0].group),
    svg("text", { class: "axis-label", x: width, y: height - 4, "text-anchor": "end" }, rows[rows.length - 1].group),
    svg("text", { class: "axis-label", x: 0, y: 10 }, `max $${fmtCost(max)}`),
  );
}

/** Horizontal bars, one per group, largest first (at most 20). */
function bars(groups) {
  const shown = groups.slice(0, 20);
  const width = 600;
  const row = 20;
  const left = 180;
  const max = Math.max(...shown.map((g) => g.costUsd), 0) || 1;
  if (!shown.length) return el("p", { class: "muted" }, "No turns in this range.");
  return svg(
    "svg",
    { class: "chart-svg", viewBox: `0 0 ${width} ${shown.length * row + 4}`, role: "img" },
    shown.map((g, i) => {
      const w = Math.max(1, (g.costUsd / max) * (width - left - 90));
      return svg(
        "g",
        { class: "spend-group", "data-group": label(g.group) },
        svg("text", { class: "axis-label", x: 0, y: i * row + 14 }, label(g.group).slice(0, 30)),
        svg("rect", { class: "spend-bar", x: left, y: i * row + 4, width: w.toFixed(1), height: row - 6 }),
        svg("text", { class: "axis-label", x: left + w + 4, y: i * row + 14 }, `$${fmtCost(g.costUsd)}`),
      );
    }),
  );
}

function table(report) {
  const figures = ["turns", "inputTokens", "outputTokens", "cacheReadTokens", "totalTokens"];
  return el(
    "table",
    { class: "spend-table" },
    el(
      "thead",
      {},
      el("tr", {}, el("th", {}, report.groupBy), el("th", { class: "num" }, "cost $"), figures.map((f) => el("th", { class: "num" }, f))),
    ),
    el(
      "tbody",
      {},
      report.groups.map((g) =>
        el(
          "tr",
          { "data-group": label(g.group) },
          el("td", {}, label(g.group)),
          el("td", { class: "num" }, fmtCost(g.costUsd)),
          figures.map((f) => el("td", { class: "num" }, String(g[f]))),
        ),
      ),
    ),
    el(
      "tfoot",
      {},
      el("tr", {}, el("th", {}, "total"), el("th", { class: "num" }, fmtCost(report.total.costUsd)), figures.map((f) => el("th", { class: "num" }, String(report.total[f])))),
    ),
  );
}
