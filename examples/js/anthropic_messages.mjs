// Talk to the gateway with the official Anthropic SDK for JavaScript (`@anthropic-ai/sdk`): only the base URL
// and the key change.
//
//   (cd examples/js && npm install)
//   node examples/js/anthropic_messages.mjs "What's the weather in Paris?"
//   node examples/js/anthropic_messages.mjs --model anthropic/tools "Weather in Paris?"   // demo gateway: tool calls
//   node examples/js/anthropic_messages.mjs --model google/gemini-2.5-flash --thinking "Why is the sky blue?"
//   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... node examples/js/anthropic_messages.mjs "Hello"
//
// Streams one turn with `client.messages.stream`: text is printed as it streams; thinking (with --thinking)
// and tool calls once their block is complete, on lines starting with `thinking: ` and `tool call: `; then the
// stop reason and the usage. With --thinking the reply goes back in a second turn, signed thinking included,
// as an agent loop would.
// Exit status: 0 done, 1 error after the stream started, 2 HTTP or connection error.

import Anthropic from "@anthropic-ai/sdk";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i === -1) return fallback;
  const [, value] = args.splice(i, 2);
  return value;
};
const flag = (name) => {
  const i = args.indexOf(name);
  if (i === -1) return false;
  args.splice(i, 1);
  return true;
};
const url = option("--url", process.env.GATEWAY_URL ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
const model = option("--model", process.env.GATEWAY_MODEL ?? "anthropic/claude-sonnet-4-5");
const key = option("--key", process.env.GATEWAY_API_KEY ?? "none");
const thinking = flag("--thinking");
const prompt = args[0] ?? "Hello! What can you do?";

const weatherTool = {
  name: "get_weather",
  description: "Current weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

// The SDK sends the key as `x-api-key`, which the gateway accepts like `Authorization: Bearer`.
const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });

async function streamTurn(messages) {
  const params = { model, max_tokens: 4096, messages, tools: [weatherTool] };
  if (thinking) params.thinking = { type: "enabled", budget_tokens: 2048 };
  const stream = client.messages.stream(params);
  const blocks = [];
  for await (const event of stream) {
    if (event.type === "message_start") {
      console.log(`[${event.message.model} ${event.message.id}]`);
    } else if (event.type === "content_block_start") {
      blocks[event.index] = { ...event.content_block, json: "", thinkingText: "" };
    } else if (event.type === "content_block_delta") {
      const delta = event.delta;
      if (delta.type === "text_delta") process.stdout.write(delta.text);
      else if (delta.type === "thinking_delta") blocks[event.index].thinkingText += delta.thinking;
      else if (delta.type === "input_json_delta") blocks[event.index].json += delta.partial_json;
    } else if (event.type === "content_block_stop") {
      const block = blocks[event.index];
      if (block.type === "text") process.stdout.write("\n");
      else if (block.type === "thinking") console.log(`thinking: ${block.thinkingText}`);
      else if (block.type === "tool_use") {
        console.log(`tool call: ${block.name} ${JSON.stringify(JSON.parse(block.json || "{}"))} (id ${block.id})`);
      }
    }
  }
  const final = await stream.finalMessage();
  const usage = final.usage;
  console.log(
    `done: ${final.stop_reason} (${usage.input_tokens} input, ${usage.output_tokens} output, ` +
      `${usage.cache_read_input_tokens ?? 0} cache read tokens)`,
  );
  return final;
}

async function main() {
  const messages = [{ role: "user", content: prompt }];
  try {
    const final = await streamTurn(messages);
    if (thinking && final.stop_reason !== "tool_use") {
      // The assistant content goes back as it came, thinking signatures included: on the same model the vendor
      // gets its own signature back and keeps its reasoning.
      messages.push({ role: "assistant", content: final.content }, { role: "user", content: "Thanks. Anything to add?" });
      await streamTurn(messages);
    }
    return 0;
  } catch (error) {
    if (error instanceof Anthropic.APIError && error.status === undefined && error.error?.type === "error") {
      // An `event: error` after the stream started.
      console.log(`\nerror: ${error.error.error.type}: ${error.error.error.message}`);
      return 1;
    }
    if (error instanceof Anthropic.APIError && error.status !== undefined) {
      // Refused before the answer started: an HTTP error status.
      console.error(`HTTP ${error.status}: ${error.error?.error?.message ?? error.message}`);
      return 2;
    }
    console.error(`error: ${error?.name}: ${error?.message}`);
    return 2;
  }
}

process.exitCode = await main();
