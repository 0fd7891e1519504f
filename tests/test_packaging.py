"""What the wheel ships: the package ``fptrack`` (the repository's root, mapped by ``package-dir``) and its
subpackages, with their data files; no tests, benchmarks, deploy files or research shelf, and nothing
installed under a generic top-level name.

``[tool.setuptools] packages`` is a list written by hand (``package-dir = {"fptrack" = "."}`` maps the root to
``fptrack``, so automatic discovery would pick up tests/ and benchmarks/ as well): a folder added to the
product and forgotten there would be missing from the installed package, unnoticed in the working tree, where
every folder is importable. The first test compares the list with the folders; the second builds the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import _require

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fptrack"
# Top-level folders that are not shipped: the research shelf is imported only by benchmarks and tests.
NOT_SHIPPED = frozenset({"tests", "testbed", "benchmarks", "research", "deploy", "docs"})
# Data files the product reads at run time, by pattern, under the package folders.
DATA_PATTERNS = ("*.html", "*.css", "*.js", "*.txt", "*.mako", "*.sql", "*.json", "*.ini", "py.typed")


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def _setuptools() -> dict[str, object]:
    tool = _pyproject()["tool"]
    assert isinstance(tool, dict)
    table = tool["setuptools"]
    assert isinstance(table, dict)
    return table


def _skipped(name: str) -> bool:
    return name.startswith(".") or name.endswith(".egg-info") or name in ("__pycache__", "build", "dist")


def _build_state(folder: str, names: list[str]) -> set[str]:
    """What the wheel's copy of the tree leaves out: caches, the virtualenv, git, earlier builds."""
    return {name for name in names if _skipped(name) or name.endswith(".pyc")}


def package_folders(root: Path = ROOT) -> set[str]:
    """The dotted names of the product's package folders: the root, and every folder under it that holds an
    ``__init__.py`` or Python modules (Alembic's ``migrations`` and ``versions`` are namespace folders of
    modules that the package runs), outside the folders that are not shipped."""
    found = {PACKAGE}
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            name for name in subfolders if not _skipped(name) and not (here == root and name in NOT_SHIPPED)
        ]
        if here != root and any(name.endswith(".py") for name in names):
            found.add(".".join([PACKAGE, *here.relative_to(root).parts]))
    return found


def data_files(root: Path = ROOT) -> set[str]:
    """The wheel paths (``fptrack/...``) of the data files under the product's package folders."""
    found = set()
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            name for name in subfolders if not _skipped(name) and not (here == root and name in NOT_SHIPPED)
        ]
        for name in names:
            if here == root and name != "py.typed":
                # the root's README.md, Makefile, pyproject.toml are the project's, not the package's
                continue
            if any(Path(name).match(pattern) for pattern in DATA_PATTERNS):
                found.add("/".join([PACKAGE, *(here / name).relative_to(root).parts]))
    return found


def test_the_package_list_names_every_package_folder() -> None:
    table = _setuptools()
    assert table["package-dir"] == {PACKAGE: "."}
    listed = table["packages"]
    assert isinstance(listed, list)
    assert len(listed) == len(set(listed)), "a package is listed twice"
    folders = package_folders()
    with_init = {
        ".".join([PACKAGE, *path.parent.relative_to(ROOT).parts])
        for path in ROOT.glob("**/__init__.py")
        if not any(_skipped(part) for part in path.relative_to(ROOT).parts)
        and path.relative_to(ROOT).parts[0] not in NOT_SHIPPED
    }
    assert with_init <= folders
    assert sorted(set(listed) - folders) == [], "listed in pyproject.toml but not a package folder"
    assert sorted(folders - set(listed)) == [], "package folders missing from pyproject.toml's packages"


def test_the_package_list_leaves_out_what_is_not_shipped() -> None:
    listed = _setuptools()["packages"]
    assert isinstance(listed, list)
    assert all(name == PACKAGE or name.startswith(PACKAGE + ".") for name in listed)
    assert not [name for name in listed if name.split(".")[1:2] and name.split(".")[1] in NOT_SHIPPED]


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
    # keeps tests/, benchmarks/ and the rest, so that leaving them out is what is checked.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_build_state, symlinks=True)
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
    dist_info = {name for name in names if name.split("/")[0].endswith(".dist-info")}
    shipped = names - dist_info
    assert dist_info, "no dist-info in the wheel"
    strangers = sorted(name for name in shipped if not name.startswith(PACKAGE + "/"))
    assert strangers == [], "the wheel installs names beside fptrack"
    # nothing of what stays in the repository
    assert not [name for name in shipped if name.split("/")[1] in NOT_SHIPPED]
    # every module and every data file of the product
    modules = {
        "/".join([PACKAGE, *path.relative_to(ROOT).parts])
        for package in package_folders()
        for path in (ROOT.joinpath(*package.split(".")[1:])).glob("*.py")
    }
    assert sorted(modules - shipped) == [], "modules missing from the wheel"
    data = data_files()
    assert {
        "fptrack/py.typed",
        "fptrack/storage/migrations/script.py.mako",
        "fptrack/admin/templates/base.html",
        "fptrack/admin/static/admin.css",
        "fptrack/cli/demo_data/lighthouse.txt",
    } <= data
    assert sorted(data - shipped) == [], "data files missing from the wheel"
