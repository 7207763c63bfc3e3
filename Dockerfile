# The gateway image. Three stages: `build` turns uv.lock into a virtualenv of the runtime dependencies only (pip
# checks every hash the lock records) and slims it (deploy/slim-venv.sh: no tests, stubs or unused AWS models,
# shared libraries stripped, bytecode compiled); `runtime-root` is the base image less what a running gateway
# never reads (deploy/slim-base.sh); the final stage is that file system flattened into one layer, plus the
# virtualenv and the source, run as an unprivileged user. No compiler, binutils, uv, pip, apt or dpkg in the final
# image. Sizes: docs/performance.md, "Image".
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
# binutils for `strip` (this stage only; the version is the base image's Debian release's).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends binutils \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml uv.lock ./
# uv only exports the lock (no network); pip installs exactly those pins, hashes required, without compiling
# (deploy/slim-venv.sh compiles once, after slimming).
RUN python3 -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir --quiet "uv==${UV_VERSION}" \
    && /opt/uv/bin/uv export --frozen --no-dev --extra azure --no-emit-project --format requirements-txt \
        --output-file requirements.txt --quiet \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --quiet --no-compile --no-deps --require-hashes -r requirements.txt \
    && /opt/venv/bin/pip uninstall --quiet --yes pip setuptools
COPY deploy/slim-venv.sh ./
RUN sh slim-venv.sh /opt/venv

FROM ${BASE_IMAGE} AS runtime-root
# The base less what a running gateway never reads (deploy/slim-base.sh): documentation, translations, apt, Perl,
# the standard library's tests and source (bytecode stays), the commands neither the entrypoint nor an operator
# uses, and every shared library that neither the kept commands nor an extension module (standard library or
# virtualenv, hence the copy here) links. dpkg's database stays, for image scanners. To add packages, derive from
# BASE_IMAGE: this stage leaves no apt, dpkg or bash.
COPY --from=build /opt/venv /opt/venv
COPY deploy/slim-base.sh /tmp/
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --home-dir /app --no-create-home --shell /usr/sbin/nologin gateway \
    && sh /tmp/slim-base.sh /opt/venv \
    && rm -rf /opt/venv /tmp/slim-base.sh

FROM scratch
# One layer: what runtime-root removed is gone, not hidden under a later layer.
# hadolint ignore=DL3067
COPY --from=runtime-root / /
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    GATEWAY_WORKERS=1
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY deploy/docker-entrypoint.sh /usr/local/bin/gateway-entrypoint
COPY app/ ./app/
COPY simulator/ ./simulator/
# Bytecode compiled here, once (the container's root file system may be read-only). ./data holds the default
# SQLite ledger (GATEWAY_DATABASE_URL=sqlite:///./data/gateway.db); mount a volume there.
RUN chmod 0755 /usr/local/bin/gateway-entrypoint \
    && python -m compileall -q -j 0 /app/app /app/simulator \
    && mkdir -p /app/data && chown gateway:gateway /app/data
VOLUME ["/app/data"]
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('GATEWAY_PORT', '8080'), timeout=2)"]
ENTRYPOINT ["gateway-entrypoint"]
