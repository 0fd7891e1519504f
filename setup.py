"""The package list, derived from the tree (the project's metadata and data patterns are in pyproject.toml).

The repository's root is the package ``fptrack`` (docs/architecture.md says why), so its subpackages are the
top-level folders that hold an ``__init__.py`` and every folder under them: Alembic's folders of modules and
the data folders (templates, static files) too, which setuptools ships as namespace packages. Left out: the
Python folders that are not the product, hidden folders (the virtualenv, the link for mypy) and caches. A
folder added to the product ships without being listed anywhere.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PACKAGE = "fptrack"
# Top-level Python folders that are not shipped: the tests and what they share with the benchmarks, the
# benchmarks and the research shelf they import.
NOT_SHIPPED = frozenset({"tests", "testbed", "benchmarks", "research"})


def _subfolders(folder: Path) -> list[Path]:
    return [
        path
        for path in sorted(folder.iterdir())
        if path.is_dir()
        and not path.is_symlink()
        and not path.name.startswith(".")
        and path.name != "__pycache__"
        and not path.name.endswith(".egg-info")
        and not (folder == ROOT and (path.name in NOT_SHIPPED or not (path / "__init__.py").is_file()))
    ]


def product_packages() -> list[str]:
    """``fptrack`` and the dotted name of every product folder under the root."""
    packages = [PACKAGE]
    waiting = _subfolders(ROOT)
    while waiting:
        folder = waiting.pop(0)
        packages.append(".".join([PACKAGE, *folder.relative_to(ROOT).parts]))
        waiting.extend(_subfolders(folder))
    return packages


class BuildPackage(build_py):
    """setuptools' build_py, less this script: it lies in the root, which is the package's folder."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        return [module for module in modules if (module[0], module[1]) != (PACKAGE, "setup")]


setup(package_dir={PACKAGE: "."}, packages=product_packages(), cmdclass={"build_py": BuildPackage})
