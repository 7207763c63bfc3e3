// The console's entry point: the client key form and the views (#/playground, #/requests, #/requests/<id>, #/health).

import { getKey, setKey } from "/console/api.js";
import { $ } from "/console/dom.js";
import { initHealth, showHealth, stopHealth } from "/console/health.js";
import { initPlayground, loadModels } from "/console/playground.js";
import { initRequests, showRecord, showRequests } from "/console/requests.js";

function showKeyState() {
  $("#key-state").textContent = getKey() ? "key set for this tab" : "no key (fine when the gateway has no keys)";
}

function route() {
  const hash = location.hash || "#/playground";
  const [, view, id] = hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || [null, "playground", null];
  const name = view === "requests" && id ? "record" : view;
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${name}`;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === view);
  if (name !== "health") stopHealth();
  if (name === "requests") showRequests();
  else if (name === "record") showRecord(decodeURIComponent(id));
  else if (name === "health") showHealth();
}

$("#key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setKey($("#key-input").value.trim());
  $("#key-input").value = "";
  showKeyState();
  loadModels();
  route();
});
$("#key-forget").addEventListener("click", () => {
  setKey("");
  showKeyState();
});

showKeyState();
initRequests();
initHealth();
window.addEventListener("hashchange", route);
await initPlayground();
route();
document.body.dataset.ready = "true";
