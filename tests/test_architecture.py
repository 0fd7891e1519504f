"""The house, checked on every run: who may import whom among the product's packages.

Every module of the product (the folders of the package ``fptrack``: tests, benchmarks and deploy are not part
of it) is parsed with :mod:`ast`, and EVERY import counts: at module level, inside functions, under
``if TYPE_CHECKING:``. An import is resolved to the module it names: ``from fptrack.storage import db`` is an
edge to ``fptrack.storage.db`` (a module), ``from fptrack.storage.db import Base`` an edge to
``fptrack.storage.db`` too (``Base`` is a name in it). Four properties are asserted:

(a) no module imports one of our folders by its bare name (``import storage``): only ``fptrack.*`` exists
    once installed, and a bare name would find a stranger's package, or nothing;
(b) the packages depend on each other only as :data:`ALLOWED` says (the layers of ``docs/architecture.md``);
(c) no import cycle between modules, not even inside one package (a cycle makes the import order matter and
    a module half-initialised when the other one reads it);
(d) no product module imports the research shelf (``fptrack.research``, not shipped in the wheel);
(e) no module takes a private name (``_sessions``) from another module: what is shared is made public, in
    the room where it belongs.

Each failure names the offending import as ``file:line``. The checker's functions are tested at the end on
small synthetic graphs, so the test is seen to fail where it should."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fptrack"
SHELF = "research"

# Who may import whom: a package always may import its own modules (cycles are checked separately). The root
# module ``fptrack`` (its ``__init__.py``) imports nothing of ours.
_ABOVE_JOBS = frozenset(
    {"core", "fingerprint", "storage", "taskqueue", "compare", "analytics", "crawler", "services"}
)
ALLOWED: Mapping[str, frozenset[str]] = {
    "": frozenset(),
    "core": frozenset(),  # settings, errors
    "fingerprint": frozenset(),  # pure algorithms
    "storage": frozenset({"core", "fingerprint"}),
    "taskqueue": frozenset({"core", "storage"}),  # the Celery app and its routing
    "compare": frozenset({"core", "fingerprint", "storage"}),
    "analytics": frozenset({"core", "storage"}),
    "crawler": frozenset({"core", "fingerprint", "storage"}),  # Scrapy parts only
    # accounts, review, evidence, exports, PDF, the listings: shared by the jobs, the admin and the CLI
    "services": frozenset({"core", "fingerprint", "storage", "compare", "analytics"}),
    "jobs": _ABOVE_JOBS,  # crawl jobs, sites, schedules, settling, re-checks, the Celery tasks
    "admin": _ABOVE_JOBS | {"jobs"},  # Flask
    "cli": _ABOVE_JOBS | {"jobs", "admin"},
    SHELF: _ABOVE_JOBS | {"jobs", "admin", "cli"},  # may import the product; nothing imports it (d)
}
PRODUCT_PACKAGES = tuple(name for name in ALLOWED if name)
# Folders of the repository that are not part of the package's import graph.
NOT_THE_PRODUCT = frozenset({"tests", "testbed", "benchmarks", "deploy", "docs"})


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``source`` imports ``target``, written at ``where`` (``path:line``).

    ``target`` is a module of ours when the import names one (or a name inside one), otherwise the imported
    dotted name as written (a third-party module, or a bare folder name)."""

    source: str
    target: str
    where: str
    name: str = ""  # for ``from target import name`` where name is not a module: the name taken


# ------------------------------------------------------------------------------------------------ reading


def module_name(root: Path, path: Path, package: str = PACKAGE) -> str:
    """The dotted name of the module at ``path`` under the package rooted at ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def product_files(root: Path, excluded: Iterable[str] = NOT_THE_PRODUCT) -> list[Path]:
    """Every ``.py`` file of the package rooted at ``root``: the root's own modules and its subfolders',
    except the folders ``excluded``, hidden or build folders (``.venv``, ``*.egg-info``) and the build script
    (``setup.py``, in the root but not shipped)."""
    skip = set(excluded)
    files: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        # pruned while walking: .venv alone holds tens of thousands of files
        top = Path(folder) == root
        subfolders[:] = sorted(
            name
            for name in subfolders
            if not (name.startswith(".") or name.endswith(".egg-info") or name == "__pycache__")
            and not (top and name in skip)
        )
        files.extend(
            Path(folder) / name
            for name in sorted(names)
            if name.endswith(".py") and not (top and name == "setup.py")
        )
    return files


def _resolve(name: str, modules: frozenset[str]) -> str:
    """The longest prefix of the dotted ``name`` that is one of our modules, or ``name`` itself."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return name


def imports_of(source: str, path: Path, tree: ast.AST, modules: frozenset[str], shown: str) -> list[Import]:
    """Every import in ``tree`` (the module ``source`` read from ``path``), wherever it is written.

    ``from X import y`` is an edge to ``X.y`` when that is a module, else to ``X``; relative imports are
    resolved against ``source``'s package (``source`` itself for an ``__init__.py``)."""
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found: list[Import] = []
    nodes = sorted(
        (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))),
        key=lambda n: n.lineno,
    )
    for node in nodes:
        where = f"{shown}:{node.lineno}"
        if isinstance(node, ast.Import):
            found.extend(Import(source, _resolve(alias.name, modules), where) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            if base == "__future__":
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in modules:
                    found.append(Import(source, child, where))
                else:
                    found.append(Import(source, _resolve(base, modules), where, alias.name))
    return found


def read_package(root: Path, package: str = PACKAGE) -> tuple[frozenset[str], list[Import]]:
    """The modules of the package rooted at ``root`` and every import they make."""
    files = product_files(root)
    modules = frozenset(module_name(root, path, package) for path in files)
    edges: list[Import] = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        shown = str(path.relative_to(root))
        edges.extend(imports_of(module_name(root, path, package), path, tree, modules, shown))
    return modules, edges


# ----------------------------------------------------------------------------------------------- checking


def layer_of(module: str, package: str = PACKAGE) -> str | None:
    """The top-level folder of ``module`` inside ``package`` (``""`` for the root module), or None when
    ``module`` is not ours."""
    if module == package:
        return ""
    if not module.startswith(package + "."):
        return None
    return module.split(".")[1]


def bare_imports(edges: Iterable[Import], folders: Iterable[str]) -> list[str]:
    """(a) imports of one of our ``folders`` by its bare name (``import storage``, ``from crawler.x import
    y``)."""
    ours = set(folders)
    return [
        f"{edge.where}: {edge.source} imports '{edge.target}': write fptrack.{edge.target}"
        for edge in edges
        if edge.target.split(".")[0] in ours
    ]


def layer_violations(edges: Iterable[Import], allowed: Mapping[str, frozenset[str]]) -> list[str]:
    """(b) imports from one package of ours into another that ``allowed`` does not list (``allowed`` maps a
    package to the packages it may import; a package missing from it may import nothing of ours)."""
    problems = []
    for edge in edges:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None or target is None or source == target:
            continue
        if target not in allowed.get(source, frozenset()):
            problems.append(
                f"{edge.where}: {edge.source} imports {edge.target} ({source or 'fptrack'} may not import "
                f"{target or 'fptrack'}; it may import: "
                f"{', '.join(sorted(allowed.get(source, ()))) or 'nothing'})"
            )
    return problems


def shelf_imports(edges: Iterable[Import], shelf: str = SHELF) -> list[str]:
    """(d) product modules that import the research shelf."""
    return [
        f"{edge.where}: {edge.source} imports {edge.target} (the research shelf is not shipped)"
        for edge in edges
        if layer_of(edge.target) == shelf and layer_of(edge.source) not in (shelf, None)
    ]


def private_imports(edges: Iterable[Import]) -> list[str]:
    """(e) private names (one leading underscore) taken from another module of ours."""
    return [
        f"{edge.where}: {edge.source} imports the private {edge.target}.{edge.name}"
        for edge in edges
        if edge.name.startswith("_")
        and not edge.name.startswith("__")
        and layer_of(edge.target) is not None
        and edge.target != edge.source
    ]


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (Tarjan's algorithm, iterative: no recursion limit),
    each sorted, in the order Tarjan closes them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    nodes = set(graph) | {target for targets in graph.values() for target in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(set(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(set(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _shortest_cycle(start: str, members: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest path start -> ... -> start inside ``members`` (breadth first), as the list of its nodes."""
    previous: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt not in members:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in seen:
                    seen.add(nxt)
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return [start]


def import_cycles(edges: Iterable[Import]) -> list[str]:
    """(c) one message per cycle between our modules (a strongly connected component of two modules or more):
    its modules, and one shortest loop through them with the file:line of each import on it."""
    edges = [edge for edge in edges if layer_of(edge.target) is not None and edge.source != edge.target]
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        where.setdefault((edge.source, edge.target), edge.where)
    problems = []
    for component in strongly_connected(graph):
        if len(component) < 2:
            continue
        loop = _shortest_cycle(component[0], set(component), graph)
        steps = "; ".join(f"{a} -> {b} ({where[(a, b)]})" for a, b in pairwise(loop))
        problems.append(f"import cycle between {', '.join(component)}: {steps}")
    return problems


def _report(title: str, problems: list[str]) -> str:
    return f"{len(problems)} {title}:\n  " + "\n  ".join(problems)


# ------------------------------------------------------------------------------------------- the house


@pytest.fixture(scope="module")
def package() -> tuple[frozenset[str], list[Import]]:
    return read_package(ROOT)


def test_the_checker_reads_the_whole_product(package: tuple[frozenset[str], list[Import]]) -> None:
    modules, edges = package
    folders = {layer_of(module) for module in modules}
    # every product folder is read (taskqueue only once it exists); nothing of tests/benchmarks/deploy is
    assert folders - {""} <= set(PRODUCT_PACKAGES) | {SHELF}, folders
    assert {"core", "fingerprint", "storage", "crawler", "jobs", "admin", "cli"} <= folders
    assert "fptrack.storage.db" in modules and "fptrack.cli" in modules
    assert not any(layer_of(module) in NOT_THE_PRODUCT for module in modules)
    assert any(edge.target == "fptrack.storage.db" for edge in edges)


def test_every_import_names_the_package(package: tuple[frozenset[str], list[Import]]) -> None:
    modules, edges = package
    folders = {module.split(".")[1] for module in modules if "." in module} | NOT_THE_PRODUCT
    problems = bare_imports(edges, folders)
    assert not problems, _report("imports of a folder by its bare name", problems)


def test_packages_depend_only_on_the_layers_below(package: tuple[frozenset[str], list[Import]]) -> None:
    _, edges = package
    problems = layer_violations(edges, ALLOWED)
    assert not problems, _report("imports across the layers", problems)


def test_no_import_cycle_between_modules(package: tuple[frozenset[str], list[Import]]) -> None:
    _, edges = package
    problems = import_cycles(edges)
    assert not problems, _report("import cycles", problems)


def test_no_product_module_imports_the_research_shelf(package: tuple[frozenset[str], list[Import]]) -> None:
    _, edges = package
    problems = shelf_imports(edges)
    assert not problems, _report("imports of the research shelf", problems)


def test_no_module_takes_another_modules_private_names(package: tuple[frozenset[str], list[Import]]) -> None:
    _, edges = package
    problems = private_imports(edges)
    assert not problems, _report("imports of private names", problems)


# ------------------------------------------------------------------------ the checker on synthetic graphs


def _edge(source: str, target: str, line: int = 1) -> Import:
    return Import(source, target, f"{source.replace('.', '/')}.py:{line}")


def test_a_cycle_is_found_and_named() -> None:
    edges = [
        _edge("fptrack.storage.a", "fptrack.storage.b", 3),
        _edge("fptrack.storage.b", "fptrack.storage.c", 4),
        _edge("fptrack.storage.c", "fptrack.storage.a", 5),
        _edge("fptrack.storage.c", "fptrack.core.settings"),
        _edge("fptrack.storage.a", "sqlalchemy"),
    ]
    (problem,) = import_cycles(edges)
    assert "fptrack.storage.a, fptrack.storage.b, fptrack.storage.c" in problem
    assert "fptrack.storage.c -> fptrack.storage.a (fptrack/storage/c.py:5)" in problem
    assert "settings" not in problem


def test_two_modules_importing_each_other_inside_functions_are_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "cli" / "__init__.py").write_text("def main() -> None:\n    from fptrack.cli import sites\n")
    (tmp_path / "cli" / "sites.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import main\n"
    )
    modules, edges = read_package(tmp_path)
    assert modules == {"fptrack", "fptrack.cli", "fptrack.cli.sites"}
    assert Import("fptrack.cli", "fptrack.cli.sites", "cli/__init__.py:2") in edges
    assert Import("fptrack.cli.sites", "fptrack.cli", "cli/sites.py:3", "main") in edges
    (problem,) = import_cycles(edges)
    assert problem.startswith("import cycle between fptrack.cli, fptrack.cli.sites")


def test_no_cycle_in_a_tree_or_through_third_party_names() -> None:
    edges = [
        _edge("fptrack.jobs.crawls", "fptrack.storage.db"),
        _edge("fptrack.jobs.crawls", "fptrack.crawler.runner"),
        _edge("fptrack.crawler.runner", "fptrack.storage.db"),
        _edge("fptrack.crawler.runner", "scrapy"),
        _edge("fptrack.storage.db", "fptrack.storage.db"),  # a module naming itself is no cycle
    ]
    assert import_cycles(edges) == []


def test_tarjan_on_a_long_chain_needs_no_recursion() -> None:
    chain = {f"m{i}": [f"m{i + 1}"] for i in range(5000)}
    assert len(strongly_connected(chain)) == 5001
    chain["m5000"] = ["m0"]
    assert [len(component) for component in strongly_connected(chain)] == [5001]


def test_an_upward_import_is_a_layer_violation() -> None:
    edges = [
        _edge("fptrack.storage.db", "fptrack.core.settings"),  # down: fine
        _edge("fptrack.storage.db", "fptrack.storage.models"),  # same package: fine
        _edge("fptrack.storage.db", "sqlalchemy"),  # not ours: fine
        _edge("fptrack.storage.sites", "fptrack.jobs.sites", 7),  # up
        _edge("fptrack.admin.web", "fptrack.cli", 9),  # sideways: admin may not import cli
        _edge("fptrack.cli", "fptrack.admin.web"),  # cli may import admin
    ]
    problems = layer_violations(edges, ALLOWED)
    assert len(problems) == 2
    assert problems[0].startswith(
        "fptrack/storage/sites.py:7: fptrack.storage.sites imports fptrack.jobs.sites"
    )
    assert "storage may not import jobs" in problems[0]
    assert problems[1].startswith("fptrack/admin/web.py:9:")
    assert "admin may not import cli" in problems[1]


def test_the_table_is_layered() -> None:
    # the table itself has no loop: otherwise (b) could pass on a tree whose packages import each other
    graph = {package: sorted(allowed) for package, allowed in ALLOWED.items()}
    assert all(len(component) == 1 for component in strongly_connected(graph))
    assert not any(SHELF in allowed for package, allowed in ALLOWED.items() if package != SHELF)


def test_bare_folder_names_and_the_shelf_are_caught(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "research").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("")
    (tmp_path / "research" / "__init__.py").write_text("")
    (tmp_path / "research" / "dna.py").write_text("from fptrack.jobs import crawls\n")
    (tmp_path / "jobs" / "crawls.py").write_text(
        "import storage.db\nfrom crawler import runner\nimport fptrack.research.dna\nimport json\n"
    )
    _, edges = read_package(tmp_path)
    assert bare_imports(edges, {"jobs", "storage", "crawler", "research"}) == [
        "jobs/crawls.py:1: fptrack.jobs.crawls imports 'storage.db': write fptrack.storage.db",
        "jobs/crawls.py:2: fptrack.jobs.crawls imports 'crawler': write fptrack.crawler",
    ]
    assert shelf_imports(edges) == [
        (
            "jobs/crawls.py:3: fptrack.jobs.crawls imports fptrack.research.dna (the research shelf is not "
            "shipped)"
        )
    ]


def test_private_names_from_another_module_are_caught(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "__init__.py").write_text("")
    (tmp_path / "jobs" / "tasks.py").write_text("_settings = None\n__all__ = ['celery']\n")
    (tmp_path / "jobs" / "crawl_tasks.py").write_text(
        "from fptrack.jobs.tasks import __all__, _settings\nfrom .tasks import _settings as settings\n"
        "from json import _default_decoder\n"
    )
    _, edges = read_package(tmp_path)
    assert private_imports(edges) == [
        "jobs/crawl_tasks.py:1: fptrack.jobs.crawl_tasks imports the private fptrack.jobs.tasks._settings",
        "jobs/crawl_tasks.py:2: fptrack.jobs.crawl_tasks imports the private fptrack.jobs.tasks._settings",
    ]


def test_relative_imports_resolve_against_the_package(tmp_path: Path) -> None:
    (tmp_path / "admin" / "views").mkdir(parents=True)
    for folder in ("", "admin", "admin/views"):
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "admin" / "web.py").write_text("")
    (tmp_path / "admin" / "views" / "api.py").write_text("from .. import web\nfrom ..web import create_app\n")
    (tmp_path / "admin" / "views" / "__init__.py").write_text("from . import api\n")
    _, edges = read_package(tmp_path)
    assert sorted((edge.source, edge.target) for edge in edges) == [
        ("fptrack.admin.views", "fptrack.admin.views.api"),
        ("fptrack.admin.views.api", "fptrack.admin.web"),
        ("fptrack.admin.views.api", "fptrack.admin.web"),
    ]
