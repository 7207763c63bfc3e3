// Pools: each pool of the catalog and its deployments' state now (GET /v1/console/pools): turns in flight,
// cooldown (until when, why, failures in a row), latency estimates, quota use; with Redis every replica's.

import { getJson } from "/console/api.js";
import { $, clear, el, fmtMs, fmtTime } from "/console/dom.js";
import { Poller } from "/console/poll.js";

const REFRESH_MS = 3000;
const poller = new Poller(refresh, REFRESH_MS);

export function showPools() {
  poller.start();
}

async function refresh() {
  const status = $("#pools-state");
  let view;
  try {
    view = await getJson("/v1/console/pools");
  } catch (error) {
    status.textContent = error.message;
    return;
  }
  status.textContent = `updated ${new Date(view.now).toLocaleTimeString(undefined, { hour12: false })}, every ${REFRESH_MS / 1000} s`;
  render(view);
}

function quota(use) {
  return use.limit === null ? `${use.used}` : `${use.used} / ${use.limit}`;
}

function cooldown(c) {
  if (c.cooling) return `cooling until ${fmtTime(c.until)} (${c.reason || "unknown"})`;
  return c.streak ? `ready (last cooled: ${c.reason || "unknown"})` : "ready";
}

function deploymentRow(d) {
  const state = !d.configured ? "not configured" : cooldown(d.cooldown);
  const cls = !d.configured ? "pool-off" : d.cooldown.cooling ? "pool-cooling" : "pool-ready";
  return el(
    "tr",
    { class: cls, "data-deployment": d.name },
    el("td", {}, d.name),
    el("td", {}, d.provider),
    el("td", {}, el("code", {}, d.model)),
    el("td", { class: "num" }, String(d.weight)),
    el("td", { class: "num" }, String(d.inFlight)),
    el("td", { class: "pool-state" }, state),
    el("td", { class: "num" }, String(d.cooldown.streak)),
    el("td", { class: "num" }, fmtMs(d.ttftMs)),
    el("td", { class: "num" }, fmtMs(d.gapMs)),
    el("td", { class: "num" }, quota(d.rpm)),
    el("td", { class: "num" }, quota(d.tpm)),
  );
}

function poolPanel(pool) {
  const shared = pool.shared ? "state shared by every replica (Redis)" : "this process's own state (no Redis)";
  return el(
    "div",
    { class: "panel pool", "data-pool": pool.name },
    el("h3", {}, pool.name, " ", el("span", { class: "badge" }, pool.strategy), " ", el("span", { class: "muted pool-shared" }, shared)),
    el(
      "table",
      { class: "pool-deployments" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["deployment", "provider", "model"].map((h) => el("th", {}, h)),
          ["weight", "in flight"].map((h) => el("th", { class: "num" }, h)),
          el("th", {}, "state"),
          ["failures in a row", "TTFT ms (EWMA)", "gap ms (EWMA)", "requests last 60 s / rpm", "tokens this minute / tpm"].map((h) => el("th", { class: "num" }, h)),
        ),
      ),
      el("tbody", {}, pool.deployments.map(deploymentRow)),
    ),
  );
}

function render(view) {
  const root = clear($("#pools"));
  if (!view.pools.length) {
    root.append(el("p", { class: "muted" }, "No pools in this gateway's catalog (docs/pools.md)."));
    return;
  }
  root.append(...view.pools.map(poolPanel));
}
