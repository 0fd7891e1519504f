"""The deployment files in deploy/ hold together: every command they run is a valid ``fptrack`` command line,
every service has a health check, every variable they read is in .env.example, and the systemd units pass
``systemd-analyze verify``. No container engine runs here, so compose.yaml is checked as data (and with
``docker compose config`` where that plugin is installed)."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from deploy import process_set
from fptrack.cli.main import main
from tests.conftest import IN_CI
from tests.test_packaging import NOT_SHIPPED

DEPLOY = process_set.DEPLOY
BIN = Path(sys.executable).parent
DEFAULTED = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")
APP_SERVICES = {"migrate", "admin", "worker", "crawler", "beat"}


def _fill_defaults(text: str, defaults: dict[str, str] | None = None) -> str:
    """``${NAME:-default}`` -> default (``${NAME}`` -> ``defaults[NAME]``), as the shell, compose or systemd
    would."""
    return DEFAULTED.sub(
        lambda m: m.group(2) if m.group(2) is not None else (defaults or {})[m.group(1)], text
    )


def _assert_valid_fptrack(argv: list[str]) -> None:
    """``fptrack ARGS --help``: an unknown command or option fails, before anything runs."""
    assert argv[0].endswith("fptrack"), argv
    shown = CliRunner().invoke(main, [*argv[1:], "--help"])
    assert shown.exit_code == 0 and "Usage: " in shown.output, (argv, shown.output)


def _variables(text: str) -> set[str]:
    return {m.group(1) for m in DEFAULTED.finditer(text)}


def _example_names() -> set[str]:
    """Every variable .env.example sets or shows commented out."""
    return set(re.findall(r"^#?([A-Z][A-Z0-9_]+)=", (DEPLOY / ".env.example").read_text(), re.MULTILINE))


def test_env_example_sets_only_real_settings_and_every_variable_the_process_set_reads() -> None:
    values = process_set.read_env_file(DEPLOY / ".env.example")  # the KEY=value lines parse
    assert {"FPTRACK_DATABASE_URL", "FPTRACK_BROKER_URL"} <= values.keys()
    settings_source = (process_set.REPO / "core" / "settings.py").read_text()
    for name in _example_names():
        assert not name.startswith("FPTRACK_") or f'"{name}"' in settings_source, (
            f"{name} is no fptrack setting"
        )
    used = _variables((DEPLOY / "Procfile").read_text()) | _variables((DEPLOY / "compose.yaml").read_text())
    for unit in (DEPLOY / "systemd").iterdir():
        used |= _variables(unit.read_text())
    assert used - _example_names() <= {"POSTGRES_PASSWORD", "ADMIN_PUBLISH"}, used - _example_names()


def test_procfile_runs_the_four_processes_with_valid_commands_and_honcho_accepts_it() -> None:
    entries = dict(re.findall(r"^(\w+):\s*(.+)$", (DEPLOY / "Procfile").read_text(), re.MULTILINE))
    assert set(entries) == {"admin", "worker", "crawler", "beat"}
    for command in entries.values():
        argv = shlex.split(_fill_defaults(command))
        assert argv[0] == "exec", command  # signals reach fptrack itself, not a shell
        _assert_valid_fptrack(argv[1:])
    assert "--no-crawls" in entries["worker"] and "--production" in entries["admin"]
    checked = subprocess.run(
        [str(BIN / "honcho"), "check", "-f", str(DEPLOY / "Procfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_compose_file_has_every_service_healthy_ordered_and_running_valid_commands() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis"} | APP_SERVICES
    for name, service in services.items():
        if service.get("restart") != "no":  # migrate is a one-shot job the others wait for
            assert service["healthcheck"]["test"], name
        for target, condition in (service.get("depends_on") or {}).items():
            wanted = "service_completed_successfully" if target == "migrate" else "service_healthy"
            assert condition == {"condition": wanted}, (name, target)
            assert target in services and target != name
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in compose["volumes"], volume
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert services["redis"]["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
    assert "healthz" in services["admin"]["healthcheck"]["test"]
    assert services["worker"]["healthcheck"]["test"][:3] == ["CMD", "fptrack", "ping"]
    assert services["crawler"]["healthcheck"]["test"][:3] == ["CMD", "fptrack", "ping"]
    for name in APP_SERVICES:
        service = services[name]
        assert (
            service["build"]["dockerfile"] == "deploy/Dockerfile"
            and service["environment"]["FPTRACK_BROKER_URL"]
        )
        for env_file in service["env_file"]:
            assert not env_file["required"] or (DEPLOY / env_file["path"]).is_file(), env_file
        _assert_valid_fptrack([_fill_defaults(part) for part in service["command"]])
        health = service.get("healthcheck", {}).get("test", [])
        if health[:2] == ["CMD", "fptrack"]:
            _assert_valid_fptrack(health[1:])
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode == 0
    ):
        config = subprocess.run(
            [docker, "compose", "-f", str(DEPLOY / "compose.yaml"), "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert config.returncode == 0, config.stderr


def test_dockerfile_installs_the_lock_then_the_tree_with_chromium_and_a_cjk_font() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    # the locked versions, checked against their hashes, then the package alone from one copy of the tree
    assert "COPY requirements/runtime.txt requirements/runtime.txt" in dockerfile
    assert "RUN pip install --require-hashes -r requirements/runtime.txt" in dockerfile
    assert re.findall(r"^COPY .*$", dockerfile, re.MULTILINE)[-1] == "COPY . ."
    assert re.search(r"^RUN pip install --no-deps \. && pip check$", dockerfile, re.MULTILINE)
    assert re.search(r"apt-get install[^\n]*\n?[^\n]*chromium[^\n]*fonts-wqy-microhei", dockerfile)


def test_the_build_context_leaves_out_what_is_not_the_product_and_keeps_the_rest() -> None:
    ignored = [
        line
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert not [line for line in ignored if line.startswith("!")], "an allow-list names every folder again"

    def left_out(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, line) for line in ignored)

    not_read = {".git", ".venv", ".mypy", "tests", "testbed", "benchmarks", "research", "deploy", "docs"}
    assert [name for name in sorted(not_read) if not left_out(name)] == []
    product = {path.parent.name for path in process_set.REPO.glob("*/__init__.py")} - NOT_SHIPPED
    assert {"crawler", "storage", "jobs", "cli"} <= product
    build_files = {"__init__.py", "py.typed", "setup.py", "pyproject.toml", "README.md", "requirements"}
    assert [name for name in sorted(product | build_files) if left_out(name)] == []


UNITS = [
    "fptrack-admin.service",
    "fptrack-worker@.service",
    "fptrack-beat.service",
    "fptrack-crawler@.service",
]


def test_systemd_units_run_valid_commands_and_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    folder = DEPLOY / "systemd"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*UNITS, "fptrack.target"])
    for name in UNITS:
        unit = (folder / name).read_text()
        defaults = dict(
            re.findall(r"(\w+)=(\S+)", " ".join(re.findall(r"^Environment=(.*)$", unit, re.MULTILINE)))
        )
        assert "EnvironmentFile=/etc/fptrack/fptrack.env" in unit and "Restart=always" in unit, name
        assert "PartOf=fptrack.target" in unit and "WantedBy=fptrack.target" in unit, name
        for line in re.findall(r"^Exec\w+=(.*)$", unit, re.MULTILINE):
            argv = shlex.split(_fill_defaults(line, defaults))
            assert argv[0].startswith("/opt/fptrack/bin/"), line
            _assert_valid_fptrack(argv)
        # the paths of an install in /opt/fptrack, here this virtualenv's, so that verify finds the programs
        (tmp_path / name).write_text(unit.replace("/opt/fptrack/bin/", f"{BIN}/"))
    (tmp_path / "fptrack.target").write_text((folder / "fptrack.target").read_text())
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        reason = (
            "systemd-analyze is not installed (apt-get install systemd): the units were checked as text only"
        )
        pytest.fail(reason) if IN_CI else pytest.skip(reason)
    names = [str(tmp_path / n.replace("@.", "@1.")) for n in UNITS] + [str(tmp_path / "fptrack.target")]
    verified = subprocess.run(
        [analyze, "verify", "--man=no", *names], capture_output=True, text=True, timeout=120, check=False
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    problems = [line for line in (verified.stdout + verified.stderr).splitlines() if "fptrack" in line]
    assert problems == [], problems


def test_the_image_and_the_set_up_install_tesseract_with_its_chinese_data() -> None:
    """Chapter images are read by Debian's Tesseract (fingerprint/ocr.py): the image installs it, and so does
    deploy/ensure-services.sh when it may; no model is fetched at run time."""
    packages = "tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-chi-tra"
    install = re.search(
        r"apt-get install.*?rm -rf /var/lib/apt/lists", (DEPLOY / "Dockerfile").read_text(), re.DOTALL
    )
    assert install is not None and packages in install.group(0)
    ensure = (DEPLOY / "ensure-services.sh").read_text()
    call = re.search(r"^ensure_packages \"tesseract (?:.*\\\n)*.*\$OCR_PACKAGES$", ensure, re.MULTILINE)
    assert f'OCR_PACKAGES="{packages}"' in ensure and call is not None
