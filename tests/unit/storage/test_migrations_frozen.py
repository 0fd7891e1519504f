"""Migrations are frozen: a revision's result depends on the database it runs on, never on the product's code
of the day nor on the environment. Every module under ``storage/migrations/versions`` is parsed with
:mod:`ast`: it imports nothing of ours (neither ``fptrack.*`` nor a folder of the package by its bare name,
nor a relative import) and nothing outside :data:`ALLOWED_IMPORTS`, and it reads no environment variable. The
checker is tested on small synthetic modules, so that it is seen to fail where it should."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
VERSIONS = ROOT / "storage" / "migrations" / "versions"

ALLOWED_IMPORTS = frozenset(
    {"__future__", "alembic", "collections", "numpy", "re", "sqlalchemy", "typing", "zlib"}
)
"""Top-level modules a migration may import: Alembic and SQLAlchemy, numpy for the page codes of revision
0016, and a few standard modules that do not read the environment."""
ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv"})


def violations(source: str, where: str) -> list[str]:
    """What in the module ``source`` (a migration, written at ``where``) breaks the freeze, as ``where:line
    reason`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"{where}:{node.lineno} relative import")
                continue
            modules = [node.module or ""]
            taken = {alias.name for alias in node.names}
            if taken & ENVIRONMENT_NAMES:
                found.append(
                    f"{where}:{node.lineno} takes {sorted(taken & ENVIRONMENT_NAMES)} from {node.module}"
                )
        elif isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            found.append(f"{where}:{node.lineno} reads the environment (.{node.attr})")
        elif isinstance(node, ast.Name) and node.id in ENVIRONMENT_NAMES | {"__import__"}:
            found.append(f"{where}:{node.lineno} uses {node.id}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            found.append(f"{where}:{node.lineno} imports dynamically")
        for module in modules:
            top = module.split(".")[0]
            if top not in ALLOWED_IMPORTS:
                found.append(f"{where}:{node.lineno} imports {module}")
    return found


def _migrations() -> list[Path]:
    return sorted(VERSIONS.glob("*.py"))


def test_every_revision_is_checked() -> None:
    names = [path.name for path in _migrations()]
    assert len(names) >= 24 and names[0].startswith("0001_"), names


def test_migrations_import_no_live_code_and_read_no_environment() -> None:
    found = [
        line
        for path in _migrations()
        for line in violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from fptrack.storage.models import match_rollup_ddl\n", "imports fptrack.storage.models"),
        ("import fptrack.fingerprint.contract\n", "imports fptrack.fingerprint.contract"),
        ("from storage.compressed import compress_text\n", "imports storage.compressed"),
        ("from . import helpers\n", "relative import"),
        ("import os\nwindow = os.environ.get('W')\n", "imports os"),
        ("import os\nwindow = os.environ.get('W')\n", "reads the environment (.environ)"),
        ("from os import getenv\n", "takes ['getenv'] from os"),
        ("def f():\n    from fptrack.fingerprint.normalize import normalize\n", "imports fptrack"),
        ("m = __import__('fptrack')\n", "imports dynamically"),
    ],
)
def test_the_checker_finds_what_breaks_the_freeze(source: str, expected: str) -> None:
    assert any(expected in line for line in violations(source, "m.py")), violations(source, "m.py")


def test_the_checker_passes_a_frozen_migration() -> None:
    source = (
        "import re\nimport zlib\n\nimport numpy as np\nimport sqlalchemy as sa\nfrom alembic import op\n"
        "from sqlalchemy.dialects import postgresql\n\n"
        "def upgrade() -> None:\n    op.execute('UPDATE works SET indexed_at = NULL')\n"
    )
    assert violations(source, "m.py") == []
