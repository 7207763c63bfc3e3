// The API page (/docs): every operation of /openapi.json, with a form to send it to this gateway.
"use strict";
const $ = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props);
  for (const child of children) node.append(child);
  return node;
};
const pretty = (value) => JSON.stringify(value, null, 2);
// The API document's texts are Markdown-ish: `code` spans become <code> (as text nodes, never parsed HTML).
const prose = (tag, text, props = {}) =>
  $(tag, props, ...String(text).split("`").map((part, i) => (i % 2 ? $("code", { textContent: part }) : part)));

function resolve(spec, schema) {
  const ref = schema && schema.$ref;
  return ref ? spec.components.schemas[ref.split("/").pop()] : schema;
}

async function send(method, path, body, output) {
  output.textContent = "";
  const headers = {};
  const key = document.getElementById("key").value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== null) headers["Content-Type"] = "application/json";
  try {
    const response = await fetch(path, { method, headers, body });
    output.append($("span", { className: "status", textContent: `HTTP ${response.status} ${response.statusText}\n` }));
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      output.append(decoder.decode(value, { stream: true }));
      output.scrollTop = output.scrollHeight;
    }
  } catch (error) {
    output.append(`request failed: ${error}`);
  }
}

function operation(spec, path, method, op) {
  const section = $("div", { className: "body" });
  if (op.description) section.append(prose("p", op.description));
  const params = (op.parameters || []).map((p) => {
    const input = $("input", { type: "text", placeholder: p.name });
    section.append($("label", {}, `${p.name} (${p.in}${p.required ? ", required" : ""}) `, input), $("br"));
    return { param: p, input };
  });
  let editor = null;
  const content = op.requestBody && op.requestBody.content["application/json"];
  if (content) {
    editor = $("textarea", { value: pretty(content.example || {}) });
    section.append($("p", { textContent: "Request body:" }), editor);
    const schema = resolve(spec, content.schema);
    if (schema) section.append($("details", {}, $("summary", { textContent: "request schema" }), $("pre", { textContent: pretty(schema) })));
  }
  const rows = Object.entries(op.responses || {}).map(([code, response]) =>
    $("tr", {}, $("td", { textContent: code }), prose("td", response.description || "")));
  section.append($("p", { textContent: "Responses:" }), $("table", {}, ...rows));
  const output = $("pre", { textContent: "" });
  const button = $("button", { textContent: "Send", type: "button" });
  button.addEventListener("click", () => {
    let url = path;
    const query = new URLSearchParams();
    for (const { param, input } of params) {
      if (!input.value) continue;
      if (param.in === "path") url = url.replace(`{${param.name}}`, encodeURIComponent(input.value));
      else if (param.in === "query") query.set(param.name, input.value);
    }
    if ([...query].length) url += `?${query}`;
    send(method.toUpperCase(), url, editor ? editor.value : null, output);
  });
  section.append($("p", {}, button), output);
  return $("details", {},
    $("summary", {}, $("span", { className: "method", textContent: method.toUpperCase() }), path,
      prose("span", op.summary || "", { className: "what" })),
    section);
}

fetch("/openapi.json").then((r) => r.json()).then((spec) => {
  const main = document.getElementById("paths");
  main.textContent = "";
  document.title = `${spec.info.title}: API`;
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(item)) main.append(operation(spec, path, method, op));
  }
}).catch((error) => { document.getElementById("paths").textContent = `could not load /openapi.json: ${error}`; });
