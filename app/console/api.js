// The gateway's HTTP API, with the client key from sessionStorage sent in the Authorization header only; the
// admin pages (Keys, Teams, Spend, Sessions) send the admin key instead, kept the same way.

const KEY = "gateway-console-key";
const ADMIN_KEY = "gateway-console-admin-key";

export function getKey() {
  return sessionStorage.getItem(KEY) || "";
}

export function setKey(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

export function getAdminKey() {
  return sessionStorage.getItem(ADMIN_KEY) || "";
}

export function setAdminKey(value) {
  if (value) sessionStorage.setItem(ADMIN_KEY, value);
  else sessionStorage.removeItem(ADMIN_KEY);
}

function headers(extra = {}) {
  const key = getKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

export class ApiError extends Error {
  constructor(status, body) {
    const message = body?.error?.message || (typeof body?.error === "string" ? body.error : `HTTP ${status}`);
    super(status === 401 ? `${message} (enter a client key above)` : message);
    this.status = status;
    this.body = body;
  }
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    /* not JSON */
  }
  return new ApiError(response.status, body);
}

export async function getJson(path) {
  const response = await fetch(path, { headers: headers({ Accept: "application/json" }), cache: "no-store" });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** A call with the admin key (`/v1/admin/*`, `/v1/spend`, `/v1/sessions`): `body`, when given, is sent as JSON. */
export async function adminJson(path, { method = "GET", body } = {}) {
  const key = getAdminKey();
  const sent = { Accept: "application/json" };
  if (key) sent.Authorization = `Bearer ${key}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers: sent,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  if (!response.ok) {
    const error = await failure(response);
    if (response.status === 401) error.message = `${error.body?.error?.message || "HTTP 401"} (enter an admin key above)`;
    throw error;
  }
  return response.json();
}

/** The admin key's text response (the spend report's CSV). */
export async function adminText(path) {
  const key = getAdminKey();
  const response = await fetch(path, { headers: key ? { Authorization: `Bearer ${key}` } : {}, cache: "no-store" });
  if (!response.ok) throw await failure(response);
  return response.text();
}

/** POST a turn to /v1/stream; returns the response once its headers arrived (throws ApiError on 4xx/5xx). */
export async function postStream(body, signal) {
  const response = await fetch("/v1/stream", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok) throw await failure(response);
  return response;
}

/** The server-sent events of a response, as {id, event, data, comment} objects, as they arrive. */
export async function* sseFrames(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame = parseFrame(block);
      if (frame) yield frame;
    }
  }
}

function parseFrame(block) {
  const frame = { id: null, event: "message", data: null, comment: null };
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "") continue;
    if (line.startsWith(":")) {
      frame.comment = line.slice(1).trim();
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") frame.id = value;
    else if (field === "event") frame.event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length) frame.data = data.join("\n");
  return frame.data !== null || frame.comment !== null ? frame : null;
}
