"""What the wheel ships, and the lock files.

The wheel holds the package ``fptrack`` (the repository's root, its package list derived from the tree by
setup.py) and every module and data file of the product; no tests, benchmarks, deploy files, research shelf,
virtualenv or build script, and nothing under a generic top-level name.

The lock files (requirements/runtime.txt, requirements/dev.txt, written by ``make lock``) pin exactly the
dependencies pyproject.toml declares and everything they need: a dependency added, removed or given extras
without ``make lock`` fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from tests.conftest import _require

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fptrack"
# Top-level Python folders that are not shipped (setup.py leaves out the same; a top-level folder without an
# ``__init__.py``, such as deploy/, docs/, requirements/, is not a package and is left out too).
NOT_SHIPPED = frozenset({"tests", "testbed", "benchmarks", "research"})
# Data files the product reads at run time, by pattern, under the package folders.
DATA_PATTERNS = (
    "*.html",
    "*.css",
    "*.js",
    "*.txt",
    "*.mako",
    "*.sql",
    "*.json",
    "*.ini",
    "*.po",
    "*.mo",
    "py.typed",
)
LOCK = ROOT / "requirements" / "runtime.txt"
LOCK_DEV = ROOT / "requirements" / "dev.txt"


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def _skipped(name: str) -> bool:
    return name.startswith(".") or name.endswith(".egg-info") or name in ("__pycache__", "build", "dist")


def _build_state(folder: str, names: list[str]) -> set[str]:
    """What the wheel's copy of the tree leaves out: caches, the virtualenv, git, earlier builds."""
    return {name for name in names if _skipped(name) or name.endswith(".pyc")}


def _product_files(root: Path = ROOT) -> list[Path]:
    """Every file under the product's folders (the root's own files included), relative to the root."""
    found = []
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            name
            for name in subfolders
            if not _skipped(name)
            and not (here == root and (name in NOT_SHIPPED or not (here / name / "__init__.py").is_file()))
        ]
        found.extend((here / name).relative_to(root) for name in names)
    return found


def product_modules(root: Path = ROOT) -> set[str]:
    """The wheel paths (``fptrack/...``) of the product's modules; setup.py, in the root, is not one."""
    return {
        "/".join([PACKAGE, *path.parts])
        for path in _product_files(root)
        if path.suffix == ".py" and path != Path("setup.py")
    }


def data_files(root: Path = ROOT) -> set[str]:
    """The wheel paths (``fptrack/...``) of the data files under the product's package folders."""
    return {
        "/".join([PACKAGE, *path.parts])
        for path in _product_files(root)
        # the root's README.md, Makefile, pyproject.toml are the project's, not the package's
        if (len(path.parts) > 1 or path.name == "py.typed")
        and any(path.match(pattern) for pattern in DATA_PATTERNS)
    }


def missing_build_requirements() -> list[str]:
    """The ``[build-system] requires`` of pyproject.toml that this interpreter lacks (``--no-build-isolation``
    builds with what is installed: no download during the tests)."""
    build_system = _pyproject()["build-system"]
    assert isinstance(build_system, dict)
    missing = []
    for line in build_system["requires"]:
        requirement = Requirement(line)
        try:
            found = version(requirement.name)
        except PackageNotFoundError:
            missing.append(f"{line} (not installed)")
            continue
        if not requirement.specifier.contains(found, prereleases=True):
            missing.append(f"{line} (found {found})")
    return missing


@pytest.mark.slow
def test_the_wheel_holds_fptrack_alone_with_its_data(tmp_path: Path) -> None:
    missing = missing_build_requirements()
    _require(not missing, f"the build requirements {', '.join(missing)}")
    # Built from a copy of the tree: setuptools writes build/ and an egg-info beside the sources, which must
    # not land in the working tree (other processes read it) nor be read back from an earlier build. The copy
    # keeps tests/, benchmarks/ and the rest, so that leaving them out is what is checked, and it is given a
    # virtualenv with a module in it, as `make install` leaves one in the root.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_build_state, symlinks=True)
    stray = source / ".venv" / "lib" / "python3.11" / "site-packages" / "stray"
    stray.mkdir(parents=True)
    (stray / "__init__.py").write_text("")
    wheels = tmp_path / "wheels"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = wheels.glob("fptrack-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {name for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert shipped != names, "no dist-info in the wheel"
    strangers = sorted(name for name in shipped if not name.startswith(PACKAGE + "/"))
    assert strangers == [], "the wheel installs names beside fptrack"
    # exactly the product's modules: none missing, and none of the tests, benchmarks, virtualenv or setup.py
    modules = product_modules()
    assert {"fptrack/__init__.py", "fptrack/storage/migrations/versions/0001_initial_schema.py"} <= modules
    assert sorted(modules - shipped) == [], "modules missing from the wheel"
    assert sorted(name for name in shipped if name.endswith(".py") and name not in modules) == []
    data = data_files()
    assert {
        "fptrack/py.typed",
        "fptrack/storage/migrations/script.py.mako",
        "fptrack/admin/templates/base.html",
        "fptrack/admin/static/admin.css",
        "fptrack/cli/demo_data/lighthouse.txt",
    } <= data
    assert sorted(data - shipped) == [], "data files missing from the wheel"
    assert sorted(shipped - modules - data) == [], "files in the wheel that are neither modules nor data"


def test_the_product_files_leave_out_what_is_not_shipped(tmp_path: Path) -> None:
    shipped = ["__init__.py", "core/__init__.py", "core/data/x.txt"]
    left_out = [
        "tests/__init__.py",
        "docs/a.txt",
        "deploy/x.py",
        "setup.py",
        ".venv/lib/x.py",
        "core/__pycache__/x.py",
    ]
    for path in shipped + left_out:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert product_modules(tmp_path) == {"fptrack/__init__.py", "fptrack/core/__init__.py"}
    assert data_files(tmp_path) == {"fptrack/core/data/x.txt"}


# --- the lock files ---------------------------------------------------------------------------------------

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


def pins(lock: Path) -> dict[NormalizedName, str]:
    """The ``name==version`` lines of a lock file, by normalised name."""
    return {canonicalize_name(name): pinned for name, pinned in PIN.findall(lock.read_text())}


def declared(extras: bool) -> list[Requirement]:
    """pyproject.toml's dependencies, and with ``extras`` those of every optional group too."""
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    lines = list(project["dependencies"])
    if extras:
        lines += [line for group in project["optional-dependencies"].values() for line in group]
    return [Requirement(line) for line in lines]


def _applies(requirement: Requirement, extras: Iterable[str]) -> bool:
    marker: Marker | None = requirement.marker
    return marker is None or any(marker.evaluate({"extra": extra}) for extra in ["", *extras])


def closure(requirements: Iterable[Requirement]) -> set[NormalizedName]:
    """Every distribution that installing ``requirements`` brings in on this interpreter, read from the
    installed distributions' metadata (the test below first checks that they are the locked versions)."""
    seen: set[tuple[NormalizedName, frozenset[str]]] = set()
    waiting = [(canonicalize_name(r.name), frozenset(r.extras)) for r in requirements if _applies(r, [])]
    while waiting:
        name, extras = waiting.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for line in requires(name) or []:
            requirement = Requirement(line)
            if _applies(requirement, extras):
                waiting.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return {name for name, _ in seen}


@pytest.mark.parametrize(("lock", "extras"), [(LOCK, False), (LOCK_DEV, True)], ids=["runtime", "dev"])
def test_a_lock_pins_what_pyproject_declares_and_no_more(lock: Path, extras: bool) -> None:
    pinned = pins(lock)
    requirements = declared(extras)
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} is declared but not locked: run `make lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{requirement} is declared, {name}=={pinned[name]} locked: run `make lock`"
        )
    installed = {}
    for name in pinned:
        try:
            installed[name] = version(name)
        except PackageNotFoundError:
            installed[name] = "(not installed)"
    behind = {name: (pinned[name], found) for name, found in installed.items() if found != pinned[name]}
    assert behind == {}, (
        "installed versions differ from the lock's (locked, installed): run `make install-test`"
    )
    needed = closure(requirements)
    assert sorted(needed - pinned.keys()) == [], "needed but not locked: run `make lock`"
    assert sorted(pinned.keys() - needed) == [], "locked but needed by nothing declared: run `make lock`"


def test_the_two_locks_agree() -> None:
    runtime, dev = pins(LOCK), pins(LOCK_DEV)
    assert {name: dev.get(name) for name in runtime} == runtime
    for lock in (LOCK, LOCK_DEV):
        # every pin carries its hashes, so that pip installs in hash-checking mode
        blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text().split("\n", 2)[2])
        assert [block.split()[0] for block in blocks if "--hash=sha256:" not in block] == [], lock.name
