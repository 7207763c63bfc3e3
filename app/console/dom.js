// DOM helpers. Everything a model, a client or the ledger produced is put on the page as text
// (textContent / text nodes), never parsed as HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

/** `el("td", {class: "num", title: "x"}, child, "text", …)`: attributes are set one by one, children are
 * nodes or strings (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export function $(selector) {
  return document.querySelector(selector);
}

/** A JSON value as a nested tree of lists (objects and arrays open, scalars typed by class). */
export function jsonTree(value) {
  if (value === null || typeof value !== "object") {
    const kind = value === null ? "null" : typeof value;
    return el("span", { class: `json-${kind}` }, kind === "string" ? JSON.stringify(value) : String(value));
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (entries.length === 0) return el("span", { class: "json-empty" }, isArray ? "[]" : "{}");
  return el(
    "ul",
    { class: "json-tree" },
    entries.map(([key, v]) => el("li", {}, el("span", { class: "json-key" }, isArray ? `${key}` : key), ": ", jsonTree(v))),
  );
}

export function fmtMs(value) {
  if (value === null || value === undefined) return "–";
  return value >= 100 ? String(Math.round(value)) : value.toFixed(1);
}

export function fmtCost(value) {
  if (value === null || value === undefined) return "–";
  if (value === 0) return "0";
  // Always plain decimals (never 2.22e-5 next to 0.000180): six places, more for a smaller cost (three significant digits).
  const places = Math.min(12, Math.max(6, 2 - Math.floor(Math.log10(Math.abs(value)))));
  return value.toFixed(places);
}

export function fmtTime(epochMs) {
  if (!epochMs) return "–";
  const d = new Date(epochMs);
  return d.toLocaleTimeString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}
