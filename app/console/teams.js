// Teams: each team with its keys, its day and month budgets as bars of the team's spend (its keys' turns), and
// its requests-per-minute limit, all shared by its keys on top of each key's own; create a team, delete one
// that has no keys (the gateway refuses otherwise, and the page says why). With the admin key only.

import { adminJson } from "/console/api.js";
import { budgetBar, numberField, spendByPeriod } from "/console/admin.js";
import { $, clear, el } from "/console/dom.js";

export function initTeams() {
  $("#team-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      name: $("#new-team-name").value.trim(),
      budgets: { budget_usd_per_day: numberField($("#new-team-day")), budget_usd_per_month: numberField($("#new-team-month")) },
      limits: { requests_per_minute: numberField($("#new-team-rpm")) },
    };
    try {
      await adminJson("/v1/admin/teams", { method: "POST", body });
      $("#team-create").reset();
    } catch (error) {
      $("#teams-state").textContent = `create: ${error.message}`;
      return;
    }
    await showTeams();
  });
}

export async function showTeams(message = "") {
  const status = $("#teams-state");
  let teams, keys, spent;
  try {
    [teams, keys, spent] = await Promise.all([adminJson("/v1/admin/teams"), adminJson("/v1/admin/keys"), spendByPeriod("team")]);
  } catch (error) {
    status.textContent = error.message;
    clear($("#teams tbody"));
    return;
  }
  const members = new Map();
  for (const key of keys.keys) if (key.team) members.set(key.team, [...(members.get(key.team) || []), key.name]);
  status.textContent = message || `${teams.teams.length} teams`;
  clear($("#teams tbody")).append(...teams.teams.map((team) => teamRow(team, members.get(team.name) || [], spent)));
}

function teamRow(team, keys, spent) {
  const budgets = team.budgets || {};
  const rpm = team.limits?.requests_per_minute;
  return el(
    "tr",
    { "data-team": team.name },
    el("td", {}, team.name),
    el("td", { class: "num", title: keys.join(", ") }, String(keys.length)),
    el("td", { class: "budget-day" }, budgetBar(spent.day.get(team.name) || 0, budgets.budget_usd_per_day)),
    el("td", { class: "budget-month" }, budgetBar(spent.month.get(team.name) || 0, budgets.budget_usd_per_month)),
    el("td", { class: "num" }, rpm ? String(rpm) : "–"),
    el("td", {}, el("button", { type: "button", class: "delete danger", onclick: () => remove(team.name) }, "Delete")),
  );
}

async function remove(name) {
  if (!confirm(`Delete team ${name}?`)) return;
  try {
    await adminJson(`/v1/admin/teams/${encodeURIComponent(name)}`, { method: "DELETE" });
  } catch (error) {
    $("#teams-state").textContent = `delete: ${error.message}`;
    return;
  }
  await showTeams(`${name} deleted`);
}
