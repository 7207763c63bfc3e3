# The gateway image. Two stages: `build` turns uv.lock into a virtualenv (pip checks every hash the lock
# records); the final stage is the base image plus that virtualenv and the source, run as an unprivileged
# user. No compiler, uv or pip in the final image.
#
#   docker build -t llm-stream-gateway .
#   docker run -p 8080:8080 -e GATEWAY_DEMO=1 llm-stream-gateway
#
# BASE_IMAGE may be any Debian-like image with python3 (>= 3.11) and its venv module, e.g. one built from
# Debian's own python3 packages (scripts/image-smoke.sh does that where no container registry is reachable).
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
ARG UV_VERSION=0.13.9
# pip trusts the base image's CA bundle, so a base image that carries a site's own CA builds behind its proxy.
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /build
COPY pyproject.toml uv.lock ./
# uv only exports the lock (no network); pip installs exactly those pins, hashes required.
RUN python3 -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir --quiet "uv==${UV_VERSION}" \
    && /opt/uv/bin/uv export --frozen --no-dev --extra azure --no-emit-project --format requirements-txt \
        --output-file requirements.txt --quiet \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --quiet --no-deps --require-hashes -r requirements.txt \
    && /opt/venv/bin/pip uninstall --quiet --yes pip

FROM ${BASE_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    GATEWAY_WORKERS=1
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /app --no-create-home --shell /usr/sbin/nologin gateway
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY deploy/docker-entrypoint.sh /usr/local/bin/gateway-entrypoint
COPY app/ ./app/
COPY simulator/ ./simulator/
# ./data holds the default SQLite ledger (GATEWAY_DATABASE_URL=sqlite:///./data/gateway.db); mount a volume there.
RUN chmod 0755 /usr/local/bin/gateway-entrypoint \
    && mkdir -p /app/data && chown gateway:gateway /app/data
VOLUME ["/app/data"]
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('GATEWAY_PORT', '8080'), timeout=2)"]
ENTRYPOINT ["gateway-entrypoint"]
