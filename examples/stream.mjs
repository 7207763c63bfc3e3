// Stream one turn from the gateway with fetch (Node 20+, no dependencies) and print it as it arrives.
//
//   node examples/stream.mjs "What's the weather in Paris?"
//   node examples/stream.mjs --model anthropic/tools "Weather in Paris?"      // demo gateway: tool calls
//   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... node examples/stream.mjs "Hello"
//
// Text is printed as it streams, a tool call when it is complete (`toolcall_end`, arguments parsed), then the
// stop reason (`done`) or the error (`error`). Exit status: 0 done, 1 error event, 2 HTTP or connection error.

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i === -1) return fallback;
  const [, value] = args.splice(i, 2);
  return value;
};
const url = option("--url", process.env.GATEWAY_URL ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
const model = option("--model", process.env.GATEWAY_MODEL ?? "anthropic/claude-sonnet-4-5");
const key = option("--key", process.env.GATEWAY_API_KEY);
const prompt = args[0] ?? "Hello! What can you do?";

const weatherTool = {
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

// Server-sent events to JSON objects: `data:` lines joined until a blank line; `event:`, `id:`, `:` ignored.
async function* sseEvents(body) {
  const decoder = new TextDecoder();
  let buffer = "";
  let data = [];
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) !== -1) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length) yield JSON.parse(data.join("\n"));
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
  }
  if (data.length) yield JSON.parse(data.join("\n"));
}

async function main() {
  const response = await fetch(`${url}/v1/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({
      model,
      context: { messages: [{ role: "user", content: prompt }], tools: [weatherTool] },
      options: { maxTokens: 1024 },
    }),
  });
  if (response.status !== 200) {
    console.error(`HTTP ${response.status}: ${await response.text()}`);
    return 2;
  }
  for await (const event of sseEvents(response.body)) {
    switch (event.type) {
      case "start":
        console.log(`[${event.provider}/${event.model} ${event.requestId}]`);
        break;
      case "text_delta":
        process.stdout.write(event.delta);
        break;
      case "text_end":
        process.stdout.write("\n");
        break;
      case "toolcall_end": {
        const call = event.toolCall;
        console.log(`tool call: ${call.name} ${JSON.stringify(call.arguments)} (id ${call.id})`);
        break;
      }
      case "done":
        console.log(`done: ${event.reason} (${event.usage.totalTokens} tokens, $${event.usage.cost.total.toFixed(6)})`);
        return 0;
      case "error":
        console.log(`\nerror: ${event.reason}: ${event.errorMessage}`);
        return 1;
    }
  }
  console.error("error: the stream ended without a done or error event");
  return 1;
}

try {
  process.exitCode = await main();
} catch (error) {
  console.error(`error: ${error.message}${error.cause ? ` (${error.cause.message ?? error.cause})` : ""}`);
  process.exitCode = 2;
}
