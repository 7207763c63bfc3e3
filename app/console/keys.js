// Keys: every key the gateway knows (managed, and from GATEWAY_API_KEYS or the keys file, marked by source),
// each with its day and month budget as a bar of today's and this month's spend; create a managed key (its
// secret shown once, here, and never again), rotate its secret, revoke it. With the admin key only.

import { adminJson } from "/console/api.js";
import { budgetBar, numberField, spendByPeriod } from "/console/admin.js";
import { $, clear, el } from "/console/dom.js";

export function initKeys() {
  $("#key-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      name: $("#new-key-name").value.trim(),
      budgets: { budget_usd_per_day: numberField($("#new-key-day")), budget_usd_per_month: numberField($("#new-key-month")) },
      models: $("#new-key-models").value.split(",").map((m) => m.trim()).filter(Boolean),
    };
    const team = $("#new-key-team").value.trim();
    if (team) body.team = team;
    try {
      const created = await adminJson("/v1/admin/keys", { method: "POST", body });
      showSecret(created, "created");
      $("#key-create").reset();
    } catch (error) {
      $("#keys-state").textContent = `create: ${error.message}`;
      return;
    }
    await showKeys();
  });
}

/** The new secret, once: it is in this page only until another action replaces it. */
function showSecret(key, what) {
  const box = clear($("#key-secret"));
  box.hidden = false;
  const until = key.previousSecretValidUntil ? ` The previous secret stays valid until ${new Date(key.previousSecretValidUntil).toLocaleString()}.` : "";
  box.append(
    el("p", {}, el("strong", {}, `Key ${key.name} ${what}.`), " Copy its secret now: it is not stored and is never shown again.", until),
    el("code", { class: "secret-value", "data-key": key.name }, key.secret),
    " ",
    el("button", { type: "button", onclick: () => { clear(box); box.hidden = true; } }, "Done"),
  );
}

function hideSecret() {
  clear($("#key-secret"));
  $("#key-secret").hidden = true;
}

export async function showKeys() {
  const status = $("#keys-state");
  let keys, spent;
  try {
    [keys, spent] = await Promise.all([adminJson("/v1/admin/keys"), spendByPeriod("key")]);
  } catch (error) {
    status.textContent = error.message;
    clear($("#keys tbody"));
    return;
  }
  status.textContent = `${keys.keys.length} keys`;
  clear($("#keys tbody")).append(...keys.keys.map((key) => keyRow(key, spent)));
}

function keyRow(key, spent) {
  const managed = key.source === "managed";
  const budgets = key.budgets || {};
  const actions = managed
    ? [
        el("button", { type: "button", class: "rotate", onclick: () => act(key, "rotate") }, "Rotate"),
        " ",
        el("button", { type: "button", class: "revoke danger", onclick: () => act(key, "revoke") }, "Revoke"),
      ]
    : el("span", { class: "muted" }, "read-only");
  return el(
    "tr",
    { "data-key": key.name },
    el("td", {}, key.name),
    el("td", {}, el("span", { class: `badge source-${key.source}` }, key.source)),
    el("td", {}, key.team || "–"),
    el("td", {}, (key.models || []).join(", ") || "any"),
    el("td", { class: "budget-day" }, budgetBar(spent.day.get(key.name) || 0, budgets.budget_usd_per_day)),
    el("td", { class: "budget-month" }, budgetBar(spent.month.get(key.name) || 0, budgets.budget_usd_per_month)),
    el("td", { class: "actions" }, actions),
  );
}

async function act(key, action) {
  const status = $("#keys-state");
  try {
    if (action === "rotate") {
      const overlap = prompt(`Rotate ${key.name}: seconds the old secret stays valid`, "0");
      if (overlap === null) return;
      const rotated = await adminJson(`/v1/admin/keys/${encodeURIComponent(key.name)}/rotate`, {
        method: "POST",
        body: { overlapSeconds: Number.parseInt(overlap, 10) || 0 },
      });
      showSecret(rotated, "rotated");
    } else {
      if (!confirm(`Revoke ${key.name}? Every replica refuses it within a second.`)) return;
      await adminJson(`/v1/admin/keys/${encodeURIComponent(key.name)}`, { method: "DELETE" });
      hideSecret();
      status.textContent = `${key.name} revoked`;
    }
  } catch (error) {
    status.textContent = `${action}: ${error.message}`;
    return;
  }
  await showKeys();
}
