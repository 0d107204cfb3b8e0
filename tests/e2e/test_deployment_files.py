"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here).

What can be checked is checked against the real thing: the compose file validates against the
Compose Specification (``check-jsonschema --builtin-schema vendor.compose-spec``) and the
Dockerfile passes ``hadolint`` (both from the test extra; under ``CI=true`` a missing tool
fails instead of skipping); every service of the manifest (trustgraph_flow/manifest.py) has
exactly one container whose command is its console script, with the bus, the stores and the
variables the manifest says it needs, each container's script accepts the environment it is
given, the start order is health-gated, and ports are published on 127.0.0.1 only.
``docker compose config`` runs too when the compose plugin is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from e2e_support import BIN, base_env, script

from trustgraph_flow.manifest import PROCESSORS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STORE_SERVICES = {e.id for e in PROCESSORS.values() if e.stores}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def service_scripts() -> set[str]:
    """The processors' console scripts, from the service manifest (tests/unit/test_manifest.py holds
    pyproject.toml to the same list)."""
    return {e.id for e in PROCESSORS.values()}


def _tool(name: str) -> str:
    """A checker of the test extra; missing, it fails under ``CI=true`` and skips elsewhere."""
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed (pip install -e '.[test]')"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def test_compose_file_follows_the_compose_specification():
    r = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                        str(ROOT / "docker-compose.yml")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dockerfile_passes_hadolint():
    r = subprocess.run([_tool("hadolint"), "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_processor_has_a_container(compose, service_scripts):
    commands = {s["command"][0] for name, s in compose["services"].items() if name not in ("pulsar", "cassandra",
                                                                                           "pulsar-init", "cli")}
    assert commands == service_scripts
    for name, s in compose["services"].items():
        if name in service_scripts:
            assert s["command"] == [name]
            assert s["image"] == "trustgraph-explain:latest" and s["build"] == "."


def test_each_container_has_the_profile_and_variables_the_manifest_gives_it(compose):
    for e in PROCESSORS.values():
        s = compose["services"][e.id]
        assert s.get("profiles", []) == ([e.profile] if e.profile else []), e.id
        missing = [v for v in e.env if v not in s["environment"]]
        assert not missing, (e.id, missing)


def test_processors_are_wired_to_pulsar_and_cassandra_with_health_gated_start(compose, service_scripts):
    services = compose["services"]
    for name in service_scripts:
        s = services[name]
        env = s["environment"]
        assert env["PULSAR_URL"] == "pulsar://pulsar:6650" and env["PUBSUB_BACKEND"] == "pulsar"
        assert env["TG_STORE"] == "cassandra" and env["CASSANDRA_HOST"] == "cassandra"
        assert s["depends_on"]["pulsar-init"] == {"condition": "service_completed_successfully"}
        if name in STORE_SERVICES:
            assert s["depends_on"]["cassandra"] == {"condition": "service_healthy"}
        assert "8000" in " ".join(s["healthcheck"]["test"]) and env["TG_METRICS_PORT"] == "8000"
        assert s["restart"] == "unless-stopped"
    assert services["pulsar"]["healthcheck"] and services["cassandra"]["healthcheck"]
    assert services["pulsar-init"]["depends_on"]["pulsar"] == {"condition": "service_healthy"}
    assert services["cli"]["depends_on"]["graph-rag"] == {"condition": "service_healthy"}


def test_ports_are_published_on_localhost_only(compose):
    for name, s in compose["services"].items():
        for port in s.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_each_container_command_accepts_its_environment(compose, service_scripts, tmp_path):
    """Run every service's console script with the container's environment and --help: it must
    parse (the env-derived defaults are valid) and name the store and bus options it gets."""
    for name in sorted(service_scripts):
        s = compose["services"][name]
        env = base_env({k: str(v).replace("${OPENAI_BASE_URL:-}", "").replace("${OPENAI_API_KEY:-}", "")
                        .replace("${OPENAI_MODEL:-}", "") for k, v in s["environment"].items()})
        r = subprocess.run([script(name), "--help"], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, (name, r.stderr[-2000:])
        assert "--pulsar-url" in r.stdout
        if name in STORE_SERVICES:
            assert "--store" in r.stdout and "--cassandra-host" in r.stdout


def test_dockerfile_installs_the_project_on_python_311_slim():
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert lines[0] == "FROM python:3.11-slim"
    assert any(line.startswith("RUN pip install .") for line in lines)
    for package in ("trustgraph_base", "trustgraph_flow", "trustgraph_cli"):
        assert any(line.startswith(f"COPY {package}") for line in lines), package
    assert any(line.startswith("USER ") and "root" not in line for line in lines)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def _compose_command() -> list[str] | None:
    """``docker compose`` (v2) when installed, else ``docker-compose`` (v1.29), else None."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.mark.skipif(_compose_command() is None, reason="neither docker compose nor docker-compose is installed")
def test_docker_compose_config_accepts_the_file(tmp_path):
    """``config`` resolves anchors, merges, profiles and depends_on conditions without an engine."""
    command = _compose_command()
    path = ROOT / "docker-compose.yml"
    if command == ["docker-compose"]:
        # v1.29 predates the top-level ``name`` key of the Compose spec; everything else it checks.
        path = tmp_path / "docker-compose.yml"
        path.write_text("".join(line for line in (ROOT / "docker-compose.yml").read_text().splitlines(True)
                                if not line.startswith("name:")))
    r = subprocess.run([*command, "-f", str(path), "--project-directory", str(ROOT), "--profile", "llm",
                        "--profile", "cli", "config"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    resolved = yaml.safe_load(r.stdout)["services"]
    assert resolved["graph-rag"]["environment"]["PULSAR_URL"] == "pulsar://pulsar:6650"
    assert resolved["librarian"]["depends_on"]["cassandra"]["condition"] == "service_healthy"
    assert resolved["text-completion"]["profiles"] == ["llm"]
