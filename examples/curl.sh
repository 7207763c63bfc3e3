#!/usr/bin/env bash
# Stream one turn from the gateway with curl and print it as it arrives.
#
#   examples/curl.sh "What's the weather in Paris?"
#   MODEL=anthropic/tools examples/curl.sh "Weather in Paris?"       # demo gateway: tool calls
#   GATEWAY_URL=http://127.0.0.1:8080 GATEWAY_API_KEY=... examples/curl.sh "Hello"
#
# With jq: text as it streams, each tool call when complete (toolcall_end), then the stop reason or error.
# Without jq: the events' JSON, one line each.
# Exit status (as examples/stream.py): 0 done, 1 an error event or a stream cut short, 2 an HTTP or connection
# error.
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

# `data: {...}` lines without their prefix, and the JSON body of an HTTP error (4xx before streaming: a `{` line);
# `t` ends the cycle after a substitution so that a stripped line is not printed twice.
events() { stream | sed -un -e 's/^data: //p' -e 't' -e '/^{/p'; }

set +e
if ! command -v jq >/dev/null; then
    last=""
    while IFS= read -r line || [ -n "$line" ]; do  # the error body has no final newline
        printf '%s\n' "$line"
        last="$line"
    done < <(events)
    case "$last" in
        '{"type":"done"'*) exit 0 ;;
        '{"type":"error"'*) exit 1 ;;
        *) exit 2 ;;  # an HTTP or connection error, or nothing at all
    esac
fi

# jq: 0 on done, 1 on an error event, 2 on an HTTP error (printed to stderr), 3 when the input ends first.
events | jq -nrj --unbuffered '
    def show:
        if .error then ("HTTP error: \(.error.type): \(.error.message)\n" | halt_error(2))
        elif .type == "start" then "[\(.provider)/\(.model) \(.requestId)]\n"
        elif .type == "text_delta" then .delta
        elif .type == "text_end" then "\n"
        elif .type == "toolcall_end" then "tool call: \(.toolCall.name) \(.toolCall.arguments | tojson) (id \(.toolCall.id))\n"
        elif .type == "done" then "done: \(.reason) (\(.usage.totalTokens) tokens)\n", halt
        elif .type == "error" then "\nerror: \(.reason): \(.errorMessage)\n", ("" | halt_error(1))
        else empty end;
    (inputs | show), ("error: the stream ended without a done or error event\n" | halt_error(3))'
status=("${PIPESTATUS[@]}")
case "${status[1]}" in
    0|1|2) exit "${status[1]}" ;;
    *) [ "${status[0]}" -eq 0 ] && exit 1 || exit 2 ;;  # cut short (1), or curl could not connect (2)
esac
