"""The environment is read at entry points only: no product module outside them reads ``os.environ`` (or
``os.getenv``) or builds settings with ``Settings.from_env``; everything else is handed its settings."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture import ROOT, product_files

ENVIRONMENT = frozenset({"environ", "getenv", "putenv", "unsetenv", "from_env"})
# Where a process starts, (file, function) or a whole folder (function None), and why it may read it.
ENTRY_POINTS: dict[tuple[str, str | None], str] = {
    ("cli", None): "the command line builds the settings every command is handed",
    ("core/settings.py", "from_env"): "the one reader of the settings' variables",
    ("admin/web.py", "create_app"): "gunicorn's app factory (`fptrack.admin.web:create_app()`) has no caller",
    (
        "jobs/site_crawl.py",
        "main",
    ): "python -m fptrack.jobs.site_crawl, a site's crawl in a process of its own",
    ("jobs/site_runs.py", "spawn_site_crawl"): "hands this process's environment on to that crawl process",
    ("fingerprint/ocr.py", "_tesseract"): "hands this process's environment on to Tesseract, one thread",
}


def environment_reads(path: Path) -> list[tuple[str, int]]:
    """Each read of the environment in the module at ``path``: (the enclosing function, or '' at module
    level; the line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reads: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inside = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Attribute) and child.attr in ENVIRONMENT:
                reads.append((inside, child.lineno))
            if isinstance(child, ast.ImportFrom) and child.module == "os":
                reads.extend((inside, child.lineno) for alias in child.names if alias.name in ENVIRONMENT)
            visit(child, inside)

    visit(tree, "")
    return reads


def _allowed(relative: str, function: str) -> bool:
    folder = relative.split("/", 1)[0]
    return (folder, None) in ENTRY_POINTS or (relative, function) in ENTRY_POINTS


def test_only_entry_points_read_the_environment() -> None:
    found = []
    for path in product_files(ROOT):
        relative = path.relative_to(ROOT).as_posix()
        found += [
            f"{relative}:{line} (in {function or 'the module'})"
            for function, line in environment_reads(path)
            if not _allowed(relative, function)
        ]
    assert not found, (
        "the environment read outside the entry points (hand the settings in instead): " + ", ".join(found)
    )


def test_the_check_sees_each_way_of_reading_it(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "import os\nfrom os import getenv\n"
        "A = os.environ.get('X')\n"
        "def f():\n    return Settings.from_env()\n"
        "class C:\n    def m(self):\n        return __import__('os').environ\n"
    )
    assert environment_reads(module) == [("", 2), ("", 3), ("f", 5), ("m", 8)]
    assert not _allowed("compare/service.py", "record_matches") and _allowed("cli/main.py", "main")
    assert _allowed("jobs/site_crawl.py", "main") and not _allowed("jobs/site_crawl.py", "run_site")
