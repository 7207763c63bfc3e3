// Stream a chat completion through the gateway with the official `openai` npm package (the Chat Completions door).
//
//   npm ci --prefix examples/js
//   node examples/js/openai_chat.mjs "What's the weather in Paris?"
//   node examples/js/openai_chat.mjs --model anthropic/tools "Weather in Paris?"   # demo gateway: tool calls
//   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... node examples/js/openai_chat.mjs "Hello"
//
// An application written for OpenAI changes two things to reach every vendor behind the gateway: `baseURL`
// (`<gateway>/v1`) and `apiKey` (a gateway client key). The model is `<provider>/<model>`, a route or an alias.
//
// Prints the serving model and the completion id, the text as it streams, each tool call when the stream ends
// (its arguments assembled from the fragments), then the finish reason and the token count. Exit status: 0 the
// completion finished, 1 it failed after it started (the SDK throws the error line), 2 HTTP or connection error.

import OpenAI from "openai";

const args = process.argv.slice(2);
let url = process.env.GATEWAY_URL || "http://127.0.0.1:8080";
let model = process.env.GATEWAY_MODEL || "anthropic/claude-sonnet-4-5";
let key = process.env.GATEWAY_API_KEY || "no-key";
const words = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--url") url = args[++i];
  else if (args[i] === "--model") model = args[++i];
  else if (args[i] === "--key") key = args[++i];
  else words.push(args[i]);
}
const prompt = words.join(" ") || "Hello! What can you do?";

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const client = new OpenAI({ baseURL: `${url.replace(/\/+$/, "")}/v1`, apiKey: key, maxRetries: 0 });
const calls = new Map();
let finish = null;
let usage = null;
let started = false;
try {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: prompt }],
    tools: [weatherTool],
    max_completion_tokens: 1024,
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role === "assistant") {
        started = true;
        console.log(`[${chunk.model} ${chunk.id}]`);
      }
      if (choice.delta.content) process.stdout.write(choice.delta.content);
      for (const call of choice.delta.tool_calls || []) {
        const entry = calls.get(call.index) || { id: "", name: "", arguments: "" };
        entry.id = call.id || entry.id;
        entry.name = call.function?.name || entry.name;
        entry.arguments += call.function?.arguments || "";
        calls.set(call.index, entry);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
} catch (error) {
  if (error instanceof OpenAI.APIError && error.status) {
    // Refused before the answer started: an HTTP error status.
    console.error(`HTTP ${error.status}: ${error.error?.message ?? error.message}`);
    process.exit(2);
  }
  if (error instanceof OpenAI.APIError && started) {
    // The completion failed after it started (an error line on the stream).
    console.log(`\nerror: ${error.error?.message ?? error.message}`);
    process.exit(1);
  }
  console.error(`error: ${error.name}: ${error.message}`);
  process.exit(2);
}
console.log();
for (const index of [...calls.keys()].sort((a, b) => a - b)) {
  const call = calls.get(index);
  console.log(`tool call: ${call.name} ${JSON.stringify(JSON.parse(call.arguments))} (id ${call.id})`);
}
console.log(`finish: ${finish}${usage ? ` (${usage.total_tokens} tokens)` : ""}`);
