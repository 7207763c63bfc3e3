// The console's entry point: the client and admin key forms and the views (#/playground, #/requests,
// #/requests/<id>, #/health, #/pools; with the admin key #/keys, #/teams, #/spend, #/sessions, #/sessions/<id>).

import { adminJson, getAdminKey, getKey, setAdminKey, setKey } from "/console/api.js";
import { $ } from "/console/dom.js";
import { initHealth, showHealth } from "/console/health.js";
import { initKeys, showKeys } from "/console/keys.js";
import { initSessions, showSession, showSessions } from "/console/sessions.js";
import { initSpend, showSpend } from "/console/spend.js";
import { initTeams, showTeams } from "/console/teams.js";
import { initPlayground, loadModels } from "/console/playground.js";
import { stopPolling } from "/console/poll.js";
import { showPools } from "/console/pools.js";
import { initRequests, showRecord, showRequests } from "/console/requests.js";

/** `accepted`: whether the gateway took this tab's key, or no key (false: it answered 401; null: unknown). */
function showKeyState(accepted = null) {
  const key = getKey();
  let text;
  if (accepted === false) text = key ? "key refused: enter another" : "this gateway requires a client key: enter one";
  else if (key) text = "key set for this tab";
  else text = accepted ? "no key needed: this gateway runs without client keys" : "no key";
  $("#key-state").textContent = text;
}

/** Whether the admin key is set, and (after a check) whether the gateway took it. */
async function showAdminKeyState() {
  const state = $("#admin-key-state");
  if (!getAdminKey()) {
    state.textContent = "no admin key";
    return;
  }
  try {
    await adminJson("/v1/admin/teams");
    state.textContent = "admin key set for this tab";
  } catch (error) {
    state.textContent = error.status === 404 ? "this gateway's admin API is off" : "admin key refused: enter another";
  }
}

function route() {
  const hash = location.hash || "#/playground";
  const [, view, id] = hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || [null, "playground", null];
  const name = view === "requests" && id ? "record" : view === "sessions" && id ? "session" : view;
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${name}`;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === view);
  stopPolling();
  if (name === "requests") showRequests();
  else if (name === "record") showRecord(decodeURIComponent(id));
  else if (name === "health") showHealth();
  else if (name === "pools") showPools();
  else if (name === "keys") showKeys();
  else if (name === "sessions") showSessions();
  else if (name === "spend") showSpend();
  else if (name === "teams") showTeams();
  else if (name === "session") showSession(decodeURIComponent(id));
}

$("#key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setKey($("#key-input").value.trim());
  $("#key-input").value = "";
  showKeyState();
  loadModels().then(showKeyState);
  route();
});
$("#key-forget").addEventListener("click", () => {
  setKey("");
  showKeyState();
  loadModels().then(showKeyState);
});
$("#admin-key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setAdminKey($("#admin-key-input").value.trim());
  $("#admin-key-input").value = "";
  showAdminKeyState();
  route();
});
$("#admin-key-forget").addEventListener("click", () => {
  setAdminKey("");
  showAdminKeyState();
  route();
});

showKeyState();
showAdminKeyState();
initRequests();
initKeys();
initSessions();
initSpend();
initTeams();
initHealth();
window.addEventListener("hashchange", route);
showKeyState(await initPlayground());
route();
document.body.dataset.ready = "true";
