# The two commands a newcomer needs: `make run` (demo gateway on 127.0.0.1:8080) and `make test`.
PYTHON ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
PY := $(VENV)/bin/python

.PHONY: run test bench venv clean image-smoke examples-js

$(UV):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==0.13.9

venv: $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet

run: venv
	GATEWAY_DEMO=$${GATEWAY_DEMO:-1} $(PY) -m app

test: venv examples-js
	$(PY) -m pytest $(PYTEST_ARGS)

# The JavaScript examples' dependencies: the official openai and Anthropic SDKs, pinned in
# examples/js/package-lock.json (installed again only when the lock file changes; skipped without npm). A
# failed install does not stop the suite: the examples' tests then try again and report the failure.
examples-js: examples/js/node_modules/.package-lock.json

examples/js/node_modules/.package-lock.json: examples/js/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix examples/js --no-audit --no-fund --loglevel=error \
	  || echo "npm ci --prefix examples/js failed: tests/test_door_examples.py will report it"; \
	else echo "npm not found: the JavaScript SDK examples are not installed (their tests skip)"; fi

bench: venv
	$(PY) -m bench

# Build the container image and serve a demo turn through it (starts a Docker engine if none is running).
image-smoke:
	bash scripts/image-smoke.sh

clean:
	rm -rf $(VENV) data .pytest_cache
