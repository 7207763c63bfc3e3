// One streamed turn through the Vercel AI SDK (`ai` streamText) against a gateway door, with two tools whose
// `execute` records every call the SDK runs. Prints one JSON line per stream part the test reads (tool-call,
// tool-result, tool-error, error, finish), then {"type": "executed", "calls": [...]}: what the SDK ran.
//
//   node ai_sdk_turn.mjs --door chat|messages|responses|gemini --url http://127.0.0.1:8080 --model anthropic/tools [--key K]
//                        [--header NAME:VALUE …] PROMPT
//
// `chat`: @ai-sdk/openai-compatible against POST /v1/chat/completions; `messages`: @ai-sdk/anthropic against
// POST /v1/messages; `responses`: @ai-sdk/openai's Responses provider (`openai.responses(model)`) against
// POST /v1/responses; `gemini`: @ai-sdk/google against POST /v1beta/models/{model}:streamGenerateContent.
// Exit status 0 whatever the turn did (the test reads the lines).
import { parseArgs } from "node:util";
import { streamText, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { z } from "zod";

globalThis.AI_SDK_LOG_WARNINGS = false; // e.g. "model unknown, max output tokens limited": not what is tested

const { values, positionals } = parseArgs({
  options: {
    door: { type: "string" },
    url: { type: "string" },
    model: { type: "string" },
    key: { type: "string", default: "sk-gateway-test" },
    header: { type: "string", multiple: true, default: [] },  // NAME:VALUE, sent with the request
  },
  allowPositionals: true,
});

function modelFor(door, url, model, key, headers) {
  if (door === "chat") {
    return createOpenAICompatible({ name: "gateway", baseURL: `${url}/v1`, apiKey: key, headers }).chatModel(model);
  }
  if (door === "messages") {
    return createAnthropic({ baseURL: `${url}/v1`, apiKey: key, headers })(model);
  }
  if (door === "responses") {
    return createOpenAI({ baseURL: `${url}/v1`, apiKey: key, headers }).responses(model);
  }
  if (door === "gemini") {
    return createGoogleGenerativeAI({ baseURL: `${url}/v1beta`, apiKey: key, headers })(model);
  }
  throw new Error(`unknown door ${door}`);
}

const headers = Object.fromEntries(values.header.map((h) => [h.slice(0, h.indexOf(":")), h.slice(h.indexOf(":") + 1).trim()]));
const executed = [];
const tools = {
  get_weather: tool({
    description: "Current weather",
    inputSchema: z.object({ city: z.string(), unit: z.string().optional() }),
    execute: async (input, { toolCallId }) => {
      executed.push({ id: toolCallId, name: "get_weather", input });
      return "18C cloudy";
    },
  }),
  get_time: tool({
    description: "Current time",
    inputSchema: z.object({ timezone: z.string() }),
    execute: async (input, { toolCallId }) => {
      executed.push({ id: toolCallId, name: "get_time", input });
      return "14:05";
    },
  }),
};

const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const message = (error) => (error && error.message) || String(error);

const result = streamText({
  model: modelFor(values.door, values.url, values.model, values.key, headers),
  prompt: positionals.join(" ") || "hello",
  tools,
  maxRetries: 0,
});
try {
  for await (const part of result.fullStream) {
    if (part.type === "tool-call") print({ type: "tool-call", id: part.toolCallId, name: part.toolName, input: part.input });
    else if (part.type === "tool-result") print({ type: "tool-result", id: part.toolCallId, name: part.toolName });
    else if (part.type === "tool-error") print({ type: "tool-error", id: part.toolCallId, error: message(part.error) });
    else if (part.type === "error") print({ type: "error", error: message(part.error) });
    else if (part.type === "finish") print({ type: "finish", reason: part.finishReason });
  }
} catch (error) {
  print({ type: "thrown", error: message(error) });
}
print({ type: "executed", calls: executed });
