#!/usr/bin/env bash
# Stream one turn from the gateway with curl and print it as it arrives.
#
#   examples/curl.sh "What's the weather in Paris?"
#   MODEL=anthropic/tools examples/curl.sh "Weather in Paris?"       # demo gateway: tool calls
#   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... examples/curl.sh "Hello"
#
# With jq: text as it streams, each tool call when complete (toolcall_end), then the stop reason or error.
# Without jq: the raw `data:` lines.
set -euo pipefail

URL="${GATEWAY_URL:-http://127.0.0.1:8080}"
MODEL="${MODEL:-${GATEWAY_MODEL:-anthropic/claude-sonnet-4-5}}"
PROMPT="${1:-Hello! What can you do?}"
AUTH=()
if [ -n "${GATEWAY_API_KEY:-}" ]; then AUTH=(-H "Authorization: Bearer $GATEWAY_API_KEY"); fi

body() {  # the request, with the prompt JSON-escaped
    local prompt="${PROMPT//\\/\\\\}"
    prompt="${prompt//\"/\\\"}"
    prompt="${prompt//$'\n'/\\n}"
    prompt="${prompt//$'\t'/\\t}"
    cat <<JSON
{"model": "$MODEL",
 "context": {"messages": [{"role": "user", "content": "$prompt"}],
             "tools": [{"name": "get_weather", "description": "Current weather for a city",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]},
 "options": {"maxTokens": 1024}}
JSON
}

# -N: no buffering, so deltas show as they arrive. --fail-with-body: an HTTP error prints its JSON and exits 22.
stream() { body | curl -sS -N --fail-with-body "${AUTH[@]}" -H 'Content-Type: application/json' --data-binary @- "$URL/v1/stream"; }

if ! command -v jq >/dev/null; then
    stream | sed -un -e 's/^data: //p' -e '/^{/p'
    exit
fi

# The `{` line is the JSON body of an HTTP error (4xx before streaming).
stream | sed -un -e 's/^data: //p' -e '/^{/p' | jq --unbuffered -rj '
    if .error then "HTTP error: \(.error.type): \(.error.message)\n"
    elif .type == "start" then "[\(.provider)/\(.model) \(.requestId)]\n"
    elif .type == "text_delta" then .delta
    elif .type == "text_end" then "\n"
    elif .type == "toolcall_end" then "tool call: \(.toolCall.name) \(.toolCall.arguments | tojson) (id \(.toolCall.id))\n"
    elif .type == "done" then "done: \(.reason) (\(.usage.totalTokens) tokens)\n"
    elif .type == "error" then "\nerror: \(.reason): \(.errorMessage)\n"
    else empty end'
