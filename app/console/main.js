// The console's entry point: the client key form and the views (#/playground, #/requests, #/requests/<id>, #/health,
// #/pools).

import { getKey, setKey } from "/console/api.js";
import { $ } from "/console/dom.js";
import { initHealth, showHealth } from "/console/health.js";
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

function route() {
  const hash = location.hash || "#/playground";
  const [, view, id] = hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || [null, "playground", null];
  const name = view === "requests" && id ? "record" : view;
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${name}`;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === view);
  stopPolling();
  if (name === "requests") showRequests();
  else if (name === "record") showRecord(decodeURIComponent(id));
  else if (name === "health") showHealth();
  else if (name === "pools") showPools();
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

showKeyState();
initRequests();
initHealth();
window.addEventListener("hashchange", route);
showKeyState(await initPlayground());
route();
document.body.dataset.ready = "true";
