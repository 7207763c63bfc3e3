#!/usr/bin/env bash
# `make image-smoke`: build the gateway image and prove it serves a demo turn.
#
# 1. Uses the running Docker engine, or starts one (installing Debian's docker.io if dockerd is missing).
#    If the engine itself cannot start, prints a loud SKIPPED line and exits 0; nothing else may skip.
# 2. Builds the image (--network host). When BASE_IMAGE cannot be pulled (no container registry reachable),
#    builds `local/python-base` instead: Debian from the mirror apt uses here (debootstrap), with python3,
#    python3-venv and this machine's CA certificates, imported with `docker import`.
# 3. Runs the container with --network host, GATEWAY_DEMO=1, two workers (sharing the host's Redis,
#    IMAGE_SMOKE_REDIS_URL, default redis://127.0.0.1:6379/13) and a read-only root file system,
#    waits for /readyz, runs the image's own HEALTHCHECK command, streams a demo turn (expects `done`),
#    checks /metrics, that it runs as a non-root user and ships no build tools, then removes the container.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE="${BASE_IMAGE:-python:3.12-slim}"
LOCAL_BASE="local/python-base"
IMAGE="${IMAGE:-llm-stream-gateway:smoke}"
WORK="${IMAGE_SMOKE_WORK:-/tmp/image-smoke}"
SUITE="${IMAGE_SMOKE_SUITE:-bookworm}"
STARTED=$SECONDS
mkdir -p "$WORK"

say() { printf '[image-smoke %3ds] %s\n' "$((SECONDS - STARTED))" "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
skip() {
    echo "######################################################################"
    echo "### SKIPPED image-smoke: $*"
    echo "######################################################################"
    exit 0
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >"$WORK/apt.log" 2>&1 || {
        as_root apt-get update -qq >>"$WORK/apt.log" 2>&1 &&
            DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >>"$WORK/apt.log" 2>&1
    }
}

# ---------------------------------------------------------------- 1. the engine
DOCKERD_PID=""
CONTAINER=""
cleanup() {
    if [ -n "$CONTAINER" ]; then docker rm -f "$CONTAINER" >/dev/null 2>&1 || true; fi
    if [ -n "$DOCKERD_PID" ]; then
        kill "$DOCKERD_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.2; done
    fi
}
trap cleanup EXIT

if ! command -v docker >/dev/null || ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
        say "installing Debian's docker.io"
        apt_install docker.io || skip "could not install docker.io (see $WORK/apt.log)"
    fi
    say "starting dockerd (log: $WORK/dockerd.log)"
    if [ "$(id -u)" -eq 0 ]; then  # started directly, so that $! is dockerd itself and cleanup can stop it
        dockerd --iptables=false --bridge=none >"$WORK/dockerd.log" 2>&1 &
    else
        sudo dockerd --iptables=false --bridge=none >"$WORK/dockerd.log" 2>&1 &
    fi
    DOCKERD_PID=$!
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$DOCKERD_PID" 2>/dev/null || break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { tail -n 20 "$WORK/dockerd.log" || true; skip "the Docker engine did not start here"; }
fi
say "engine: $(docker version --format '{{.Server.Version}}')"

# ---------------------------------------------------------------- 2. the base image and the build
debian_mirror() {
    # The Debian archive apt uses on this machine (first non-security source), from either source format.
    local f files=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ "${#files[@]}" -gt 0 ] || return 0
    awk '/^URIs:/ {print $2} /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
        "${files[@]}" | grep -E '/debian/?$' | head -n 1 || true
}

build_local_base() {
    local mirror rootfs
    mirror="$(debian_mirror)"
    [ -n "$mirror" ] || fail "no Debian mirror found in apt's sources to debootstrap from"
    command -v debootstrap >/dev/null || { say "installing debootstrap"; apt_install debootstrap || fail "could not install debootstrap"; }
    rootfs="$WORK/rootfs"
    as_root rm -rf "$rootfs"
    say "debootstrap $SUITE (python3, python3-venv) into $rootfs"
    as_root debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 || { tail -n 20 "$WORK/debootstrap.log"; fail "debootstrap failed"; }
    # Trust what this machine trusts (a site CA in front of the package registries), for pip in the build stage.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        as_root cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        as_root chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || fail "update-ca-certificates failed in the base image"
    fi
    as_root rm -rf "$rootfs/var/lib/apt/lists"/* "$rootfs/var/cache/apt"/*
    say "importing $LOCAL_BASE"
    as_root tar -C "$rootfs" -c . | docker import --change 'ENV LANG=C.UTF-8' - "$LOCAL_BASE" >/dev/null
    as_root rm -rf "$rootfs"
}

base="$BASE_IMAGE"
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 && ! timeout 120 docker pull -q "$BASE_IMAGE" >"$WORK/pull.log" 2>&1; then
    say "cannot pull $BASE_IMAGE (no container registry reachable; details in $WORK/pull.log): using $LOCAL_BASE"
    base="$LOCAL_BASE"
    docker image inspect "$LOCAL_BASE" >/dev/null 2>&1 || build_local_base
fi

# Without the buildx plugin the CLI falls back to the classic builder; say so up front instead of warning.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0
say "building $IMAGE from $base (log: $WORK/build.log)"
docker build --network host --build-arg "BASE_IMAGE=$base" -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; fail "docker build failed"; }
say "built: $(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}')"

# What the slimmed base and virtualenv must still hold (deploy/slim-base.sh, deploy/slim-venv.sh): every module of
# the gateway and the simulator, the cloud SDKs' clients and credential chains, both OTLP exporters (resolved by
# their entry points, as the SDK's configurator does), and the standard library's extension modules with the
# shared libraries they link (TLS with the CA bundle, SQLite, hashes, compression, ctypes, time zones).
docker run --rm -i --read-only "$IMAGE" python - >"$WORK/imports.log" 2>&1 <<'PY' || { tail -n 30 "$WORK/imports.log"; fail "the image cannot import or use what the gateway needs"; }
import bz2, ctypes, hashlib, importlib, importlib.metadata as md, lzma, pkgutil, sqlite3, ssl, uuid, zoneinfo
import app, simulator
modules = [m.name for p in (app, simulator) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
for name in modules:
    importlib.import_module(name)
import anthropic, openai, google.genai, google.auth, google.auth.transport.requests, google.oauth2.service_account
import azure.identity.aio, boto3, botocore.session, grpc, cryptography.hazmat.primitives.asymmetric.ec as ec
anthropic.AsyncAnthropicBedrock(aws_region="us-east-1", aws_access_key="a", aws_secret_key="b")
boto3.Session(region_name="us-east-1").client("bedrock-runtime", aws_access_key_id="a", aws_secret_access_key="b")
botocore.session.get_session().create_client("sts", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
azure.identity.aio.DefaultAzureCredential()
ec.generate_private_key(ec.SECP256R1())
for group in ("opentelemetry_traces_exporter", "opentelemetry_metrics_exporter"):
    for entry in md.entry_points(group=group):
        if entry.name in ("otlp_proto_grpc", "otlp_proto_http"):
            entry.load()().shutdown()
grpc.insecure_channel("127.0.0.1:1").close()
assert ssl.create_default_context().cert_store_stats()["x509_ca"] > 0, "no CA certificates"
sqlite3.connect(":memory:").execute("select 1")
hashlib.md5(b"", usedforsecurity=False), hashlib.sha3_256(b""), uuid.uuid4(), ctypes.CDLL(None)
lzma.compress(b"x"), bz2.compress(b"x"), zoneinfo.ZoneInfo("Europe/Paris")
print(len(modules), "gateway modules imported; SDKs, exporters and the standard library's extensions work")
PY
say "imports: $(tail -n 1 "$WORK/imports.log")"

# ---------------------------------------------------------------- 3. run it
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
CONTAINER="gateway-smoke-$$"
# Two workers need a shared Redis: the host's (--network host), a db number of the smoke's own.
REDIS_URL="${IMAGE_SMOKE_REDIS_URL:-redis://127.0.0.1:6379/13}"
docker run -d --name "$CONTAINER" --network host --read-only --tmpfs /tmp \
    -e GATEWAY_DEMO=1 -e GATEWAY_PORT="$PORT" -e GATEWAY_WORKERS=2 -e GATEWAY_REDIS_URL="$REDIS_URL" "$IMAGE" >/dev/null
say "container $CONTAINER on $URL"

http() {  # http METHOD PATH [BODY] -> prints "STATUS\n<body>"; never fails on an HTTP status (0: no answer)
    python3 - "$1" "$URL$2" "${3:-}" <<'PY'
import sys, urllib.error, urllib.request
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, method=method, data=body.encode() if body else None,
                             headers={"content-type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        status, text = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read().decode()
except OSError as e:
    status, text = 0, str(e)
print(status)
print(text)
PY
}

ready=""
for _ in $(seq 1 60); do
    [ "$(docker inspect --format '{{.State.Running}}' "$CONTAINER")" = true ] || break
    answer="$(http GET /readyz)"
    if [ "${answer%%$'\n'*}" = 200 ]; then ready=1; break; fi
    sleep 1
done
[ -n "$ready" ] || { docker logs "$CONTAINER" 2>&1 | tail -n 30; fail "/readyz never answered 200"; }
say "/readyz 200"

# The image's own HEALTHCHECK command, run now rather than waiting for its first interval.
mapfile -t check < <(docker inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE" \
    | python3 -c 'import json, sys; t = json.load(sys.stdin); assert t[0] == "CMD", t; print("\n".join(t[1:]))')
docker exec "$CONTAINER" "${check[@]}" || fail "the image's HEALTHCHECK command failed"
say "HEALTHCHECK command passes"

uid="$(docker exec "$CONTAINER" id -u)"
[ "$uid" != 0 ] || fail "the container runs as root"
for tool in gcc cc make pip pip3 uv; do
    if docker exec "$CONTAINER" sh -c "command -v $tool" >/dev/null 2>&1; then fail "the final image ships $tool"; fi
done
say "runs as uid $uid; no compiler, pip or uv in the image"

body='{"model": "anthropic/claude-sonnet-4-5", "context": {"messages": [{"role": "user", "content": "image smoke"}]}}'
stream="$(http POST /v1/stream "$body")"
[ "$(head -n 1 <<<"$stream")" = 200 ] || { echo "$stream" | head -n 20; fail "/v1/stream did not answer 200"; }
grep -q '^event: done' <<<"$stream" || { echo "$stream" | tail -n 20; docker logs "$CONTAINER" 2>&1 | tail -n 20; fail "the demo turn did not end in done"; }
grep -q 'Hello from the simulator' <<<"$stream" || fail "the demo turn streamed no simulator text"
say "demo turn streamed and ended in done"

metrics="$(http GET /metrics)"
[ "$(head -n 1 <<<"$metrics")" = 200 ] || { echo "$metrics" | head -n 5; fail "/metrics did not answer 200"; }
grep -q '^gateway_' <<<"$metrics" || fail "/metrics has no gateway_ series"
say "/metrics 200 ($(grep -c '^gateway_' <<<"$metrics") gateway_ samples)"

docker rm -f "$CONTAINER" >/dev/null
CONTAINER=""
say "PASSED in $((SECONDS - STARTED))s"
