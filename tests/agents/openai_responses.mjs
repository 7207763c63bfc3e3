// The official `openai` Node SDK (`client.responses.create`) against the gateway's Responses door. Prints one
// JSON line per result the test reads, then {"type": "done"}.
//
//   node openai_responses.mjs --mode text|tools|chain --url http://127.0.0.1:8080 [--url2 URL] --model M
//                             [--key K] PROMPT
//
// text:  one answer not streamed, then one streamed (the event types, the text deltas, the final response).
// tools: a tool loop whose history the client keeps (store: false): the model calls `Bash`, the script runs it
//        (it answers PROMPT's proof) and sends the function_call_output back with the whole conversation.
// chain: the same loop with store: true and previous_response_id, its second request sent to --url2 (another
//        gateway replica on the same ledger database): only the function_call_output goes with it.
// Exit status 0 whatever the gateway answered (an SDK error is printed as {"type": "thrown"}).
import { parseArgs } from "node:util";
import OpenAI from "openai";

const { values, positionals } = parseArgs({
  options: {
    mode: { type: "string" },
    url: { type: "string" },
    url2: { type: "string" },
    model: { type: "string" },
    key: { type: "string", default: "sk-gateway-test" },
  },
  allowPositionals: true,
});

const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const client = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: values.key, maxRetries: 0, timeout: 30_000 });
const prompt = positionals.join(" ") || "hello";
const BASH = {
  type: "function",
  name: "Bash",
  description: "Run a shell command and return what it printed",
  parameters: {
    type: "object",
    properties: { command: { type: "string" }, description: { type: "string" } },
    required: ["command"],
  },
};

function runCalls(response) {
  // Run every function call of a response (the `Bash` tool answers with the prompt's proof).
  const calls = response.output.filter((item) => item.type === "function_call");
  for (const call of calls) print({ type: "call", name: call.name, callId: call.call_id, arguments: JSON.parse(call.arguments) });
  return calls.map((call) => ({ type: "function_call_output", call_id: call.call_id, output: `ran: ${prompt}` }));
}

async function text() {
  const api = client(values.url);
  const whole = await api.responses.create({ model: values.model, input: prompt, instructions: "Be brief." });
  print({ type: "response", id: whole.id, status: whole.status, text: whole.output_text, usage: whole.usage });
  const stream = await api.responses.create({ model: values.model, input: prompt, stream: true });
  const events = [];
  let deltas = "";
  let final = null;
  for await (const event of stream) {
    events.push({ type: event.type, sequence: event.sequence_number });
    if (event.type === "response.output_text.delta") deltas += event.delta;
    if (event.type === "response.completed" || event.type === "response.failed") final = event.response;
  }
  // The SDK adds `output_text` to what `create` returns, not to the streamed events' `response`.
  const textOf = (response) => response.output.filter((i) => i.type === "message")
    .flatMap((i) => i.content).filter((p) => p.type === "output_text").map((p) => p.text).join("");
  print({ type: "stream", events, deltas, status: final && final.status, text: final && textOf(final) });
}

async function tools() {
  const api = client(values.url);
  const history = [{ role: "user", content: prompt }];
  const first = await api.responses.create({ model: values.model, input: history, tools: [BASH], store: false });
  print({ type: "response", id: first.id, status: first.status, text: first.output_text });
  const outputs = runCalls(first);
  const second = await api.responses.create({
    model: values.model, input: [...history, ...first.output, ...outputs], tools: [BASH], store: false,
  });
  print({ type: "response", id: second.id, status: second.status, text: second.output_text });
}

async function chain() {
  const first = await client(values.url).responses.create({ model: values.model, input: prompt, tools: [BASH], store: true });
  print({ type: "response", id: first.id, status: first.status, text: first.output_text, store: first.store });
  const outputs = runCalls(first);
  const second = await client(values.url2).responses.create({
    model: values.model, previous_response_id: first.id, input: outputs, tools: [BASH], store: true,
  });
  print({ type: "response", id: second.id, status: second.status, text: second.output_text, previous: second.previous_response_id });
  const fetched = await client(values.url2).responses.retrieve(first.id);
  print({ type: "retrieved", id: fetched.id, status: fetched.status });
}

try {
  await { text, tools, chain }[values.mode]();
} catch (error) {
  print({ type: "thrown", status: error.status ?? null, error: (error && error.message) || String(error) });
}
print({ type: "done" });
