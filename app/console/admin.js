// What the admin pages (Keys, Teams, Spend, Sessions) share: the UTC day and month a budget counts, a spend
// report by key or team over one of them, and a budget bar.

import { adminJson } from "/console/api.js";
import { el, fmtCost, svg } from "/console/dom.js";

/** Epoch ms of this UTC day's and this UTC month's start: the periods budgets count (docs/admin.md). */
export function periodStarts(now = new Date()) {
  return {
    day: Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()),
    month: Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1),
  };
}

/** Spend (USD) per group (`key` or `team`) today and this month: `{day: Map, month: Map}`. */
export async function spendByPeriod(groupBy) {
  const starts = periodStarts();
  const [day, month] = await Promise.all(
    [starts.day, starts.month].map((from) => adminJson(`/v1/spend?groupBy=${groupBy}&from=${from}`)),
  );
  const byGroup = (report) => new Map(report.groups.map((row) => [row.group, row.costUsd]));
  return { day: byGroup(day), month: byGroup(month) };
}

/** A budget's use as a bar and its figures: spent of budget (none set: just the spend). */
export function budgetBar(spent, budget) {
  if (!budget) return el("span", { class: "budget budget-none" }, `$${fmtCost(spent)} (no budget)`);
  const ratio = spent / budget;
  const width = Math.max(0, Math.min(100, ratio * 100));
  const level = ratio >= 1 ? "budget-over" : ratio >= 0.8 ? "budget-near" : "budget-ok";
  return el(
    "span",
    { class: `budget ${level}`, "data-ratio": ratio.toFixed(4) },
    svg(
      "svg",
      { class: "budget-bar", viewBox: "0 0 100 8", preserveAspectRatio: "none", role: "img" },
      svg("rect", { class: "budget-track", x: 0, y: 0, width: 100, height: 8 }),
      svg("rect", { class: "budget-fill", x: 0, y: 0, width: width.toFixed(2), height: 8 }),
    ),
    el("span", { class: "budget-text" }, `$${fmtCost(spent)} of $${budget} (${Math.round(ratio * 100)} %)`),
  );
}

/** A number input's value, 0 when empty. */
export function numberField(input) {
  const value = input.valueAsNumber;
  return Number.isFinite(value) ? value : 0;
}
