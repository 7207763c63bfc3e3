#!/bin/sh
# Container entrypoint: uvicorn with the production loop and parser (uvloop, httptools with the gateway's
# bounds on request headers, app.server.hosting.BoundedHttpToolsProtocol).
#
#   GATEWAY_HOST, GATEWAY_PORT     bind address (the image sets 0.0.0.0:8080)
#   GATEWAY_WORKERS                worker processes (default 1). More than one needs GATEWAY_REDIS_URL (the
#                                  workers share limits, budgets, pools and resumable streams there; refused
#                                  here without it, exit 3). Prometheus metrics are then kept in
#                                  PROMETHEUS_MULTIPROC_DIR (default /tmp/gateway-metrics), emptied here at
#                                  start as prometheus-client requires, and /metrics sums every worker.
#   GATEWAY_DRAIN_TIMEOUT          seconds in-flight streams get on SIGTERM (the app's setting, default 20);
#                                  uvicorn's own graceful-shutdown limit is set 10 s above it.
#   GATEWAY_LOG_LEVEL              uvicorn's log level too (default info)
#
# Any arguments replace the server command (e.g. `docker run IMAGE python -c ...`).
set -eu

if [ "$#" -gt 0 ]; then
    exec "$@"
fi

workers="${GATEWAY_WORKERS:-1}"
case "$workers" in
    ''|*[!0-9]*) echo "GATEWAY_WORKERS must be a whole number, got '$workers'" >&2; exit 64 ;;
esac
[ "$workers" -ge 1 ] || workers=1
export GATEWAY_WORKERS="$workers"  # the app reads it too (app/settings.py: at least 1)

if [ "$workers" -gt 1 ]; then
    if [ -z "${GATEWAY_REDIS_URL:-}" ]; then
        echo "start-up failed: GATEWAY_WORKERS=$workers needs GATEWAY_REDIS_URL: without it each worker process counts key, team and user limits, budget reservations and pool state alone (N workers would allow N times each limit) and resumes only its own streams; set GATEWAY_REDIS_URL (redis://host:6379/0, the Redis replicas share; docs/replicas.md), or set GATEWAY_WORKERS=1" >&2
        exit 3
    fi
    PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-/tmp/gateway-metrics}"
    export PROMETHEUS_MULTIPROC_DIR
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    find "$PROMETHEUS_MULTIPROC_DIR" -mindepth 1 -maxdepth 1 -name '*.db' -delete
else
    # One process keeps its metrics in memory.
    unset PROMETHEUS_MULTIPROC_DIR prometheus_multiproc_dir 2>/dev/null || true
fi

drain="${GATEWAY_DRAIN_TIMEOUT:-20}"
drain="${drain%%.*}"
case "$drain" in
    ''|*[!0-9]*) drain=20 ;;
esac

exec python -m uvicorn app.main:app \
    --host "${GATEWAY_HOST:-0.0.0.0}" \
    --port "${GATEWAY_PORT:-8080}" \
    --workers "$workers" \
    --loop uvloop \
    --http app.server.hosting:BoundedHttpToolsProtocol \
    --timeout-graceful-shutdown "$((drain + 10))" \
    --log-level "$(echo "${GATEWAY_LOG_LEVEL:-info}" | tr '[:upper:]' '[:lower:]')" \
    --no-server-header
