# The commands a newcomer needs: `make run` (demo gateway on 127.0.0.1:8080), `make check` and `make test`.
PYTHON ?= python3
VENV := .venv
UV := $(VENV)/bin/uv
PY := $(VENV)/bin/python

.PHONY: run check test bench venv venv-runtime clean image-smoke npm-packages peer-packages aider-venv

$(UV):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==0.13.9

# Both install the dependencies with their bytecode compiled (--compile-bytecode, as the image does): a process
# then loads them instead of compiling every module at each start where bytecode is never written
# (PYTHONDONTWRITEBYTECODE), which halves the gateway's start (docs/performance.md, "Start-up").
# Everything: the runtime dependencies and the development group (pytest, playwright, mypy, ruff, …).
venv: $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet --compile-bytecode

# The runtime dependencies only: what `make run` needs. --inexact keeps what is installed besides them (a .venv
# that `make test` or `make check` filled stays whole).
venv-runtime: $(UV)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet --no-dev --inexact --compile-bytecode

run: venv-runtime
	GATEWAY_DEMO=$${GATEWAY_DEMO:-1} $(PY) -m app

# The gate (docs/internals.md, "The gate"): lint, format and types, as configured in pyproject.toml.
check: venv
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy

# The suite runs on PYTEST_WORKERS pytest-xdist workers (0: in this process). On the 2-CPU machine 2, 4 and 6 workers
# finish within noise of each other (the gateway processes tests start are CPU-bound, the rest waits on loopback and
# timers); 4 keeps both CPUs busy while tests wait. worksteal: a worker that is done takes half of the longest queue,
# so a slow test does not leave one worker running alone at the end.
PYTEST_WORKERS ?= 4
test: venv npm-packages aider-venv
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The npm packages the tests run, each folder pinned by its package-lock.json and installed again only when
# that lock file changes (skipped without npm): examples/js, the official openai and Anthropic SDKs of the
# door examples; tests/agents, the agent CLIs (Claude Code, Codex, Gemini CLI, pi, OpenCode, Qwen Code, the
# GitHub Copilot CLI: native binaries come in their platform packages) and the Vercel AI SDK. A failed install
# does not stop the suite: the tests then try again and report the failure.
NPM_FOLDERS := examples/js tests/agents
npm-packages: $(NPM_FOLDERS:%=%/node_modules/.package-lock.json)

%/node_modules/.package-lock.json: %/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $* --no-audit --no-fund --loglevel=error \
	  || echo "npm ci --prefix $* failed: the tests or bench scenarios that run its packages will report it"; \
	else echo "npm not found: $* is not installed (the tests or bench scenarios that run its packages skip)"; fi

# The peer gateways the bench runs beside this one (bench/peers: Portkey's, pinned by its package-lock.json; the
# `peers` scenario of `make bench`, bench/peer_bench.py), installed the same way; without npm the scenario is skipped.
PEER_FOLDERS := bench/peers
peer-packages: $(PEER_FOLDERS:%=%/node_modules/.package-lock.json)

# Aider (PyPI `aider-chat`, pinned in tests/agents/aider/requirements.txt) in a virtual environment of its own,
# tests/agents/.aider-venv (it pins its own dependency versions, which must not reach .venv), installed again only
# when the requirements file changes (the copy in the venv marks the install done). A failed install does not stop
# the suite: tests/agents/test_agent_aider.py then skips, or fails in CI, and says why.
AIDER_VENV := tests/agents/.aider-venv
aider-venv: $(AIDER_VENV)/requirements.txt

$(AIDER_VENV)/requirements.txt: tests/agents/aider/requirements.txt | venv
	@rm -f $@; ($(PY) -m venv --clear $(AIDER_VENV) \
	  && $(AIDER_VENV)/bin/pip install --quiet --disable-pip-version-check -r $< && cp $< $@) \
	  || echo "installing Aider into $(AIDER_VENV) failed: its tests will report it"

bench: venv peer-packages
	$(PY) -m bench

# Build the container image and serve a demo turn through it (starts a Docker engine if none is running).
image-smoke:
	bash scripts/image-smoke.sh

clean:
	rm -rf $(VENV) $(AIDER_VENV) data .pytest_cache
