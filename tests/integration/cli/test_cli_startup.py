"""What ``fptrack`` loads to start (start-up is part of every crawl's wall time): a command imports its own
module, not every command group's; the schema check does not import Alembic once the head is kept in the cache
folder; and ``fptrack --help`` still lists every command with its short help."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import click

import fptrack.cli as cli_package
from fptrack.cli.main import COMMAND_MODULES
from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config
from tests.support.cli import assert_clean_error, fptrack
from tests.support.env import clean_environ

# Runs the command line in this child, then writes the names of the modules it imported to the file named by
# argv[1]: what a user's `fptrack ...` would have loaded.
_MODULES_AFTER = """
import json, sys
from fptrack.cli.main import main
out, args = sys.argv[1], sys.argv[2:]
try:
    main(args, prog_name="fptrack")
except SystemExit as end:
    code = end.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _modules_after(tmp_path: Path, *args: str, **env: str) -> set[str]:
    out = tmp_path / "modules.json"
    environ = clean_environ(FPTRACK_DATA_DIR=str(tmp_path / "data"), **env)
    completed = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, str(out), *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(out.read_text())
    assert result["code"] in (0, None), (args, completed.stdout, completed.stderr)
    return set(result["modules"])


def _registered() -> dict[str, click.Command]:
    commands = {}
    for module, names in COMMAND_MODULES.items():
        for name in names:
            command = getattr(importlib.import_module(module), name)
            assert isinstance(command, click.Command) and command.name == name, (module, name)
            commands[name] = command
    return commands


def test_every_command_of_the_cli_modules_is_registered() -> None:
    """A command written in a module of ``cli`` and not listed in COMMAND_MODULES would be unreachable."""
    defined: set[click.Command] = set()
    subcommands: set[click.Command] = set()
    for info in pkgutil.iter_modules(cli_package.__path__):
        if info.name in ("__main__", "main"):
            continue  # the root group, and running the command line
        module = importlib.import_module(f"fptrack.cli.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, click.Command)
                and getattr(value.callback, "__module__", "") == module.__name__
            ):
                defined.add(value)
                if isinstance(value, click.Group):
                    subcommands.update(value.commands.values())
    top_level = {command.name for command in defined - subcommands}
    assert top_level == set(_registered())


def test_help_lists_every_command_with_its_short_help(tmp_path: Path) -> None:
    result = fptrack(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    listing = result.stdout.split("\nCommands:\n", 1)[1]
    shown = dict(line.strip().split(None, 1) for line in listing.splitlines() if line.strip())
    commands = _registered()
    assert set(shown) == set(commands)
    for name, command in commands.items():
        short_help = command.get_short_help_str(limit=1000)
        assert short_help and short_help.startswith(shown[name].removesuffix("...")), (name, shown[name])


def test_crawl_help_loads_no_other_command_group(tmp_path: Path) -> None:
    modules = _modules_after(tmp_path, "crawl", "--help")
    assert "fptrack.cli.crawl" in modules
    for heavy in (
        "flask",
        "weasyprint",
        "alembic",
        "fptrack.admin",
        "fptrack.analytics",
        "fptrack.cli.notices",
        "fptrack.cli.users",
        "fptrack.cli.processes",
    ):
        assert heavy not in modules, heavy


def test_schema_check_keeps_alembic_out_once_the_head_is_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert fptrack(tmp_path, "init", FPTRACK_CACHE_DIR=str(cache)).returncode == 0
    # init leaves the head cached itself (it opens the database again to index the works registered before
    # the entity index): start from no cache, as a process of a new release does
    for cached in cache.glob("schema-head-*"):
        cached.unlink()
    first = _modules_after(tmp_path, "works", "list", FPTRACK_CACHE_DIR=str(cache))
    second = _modules_after(tmp_path, "works", "list", FPTRACK_CACHE_DIR=str(cache))
    assert "alembic" in first and "alembic" not in second

    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(Settings(cache_dir=cache))).get_current_head()
    kept = list(cache.glob("schema-head-*"))
    assert len(kept) == 1 and kept[0].read_text() == head
    # no cache folder: Alembic is asked, and the check still passes
    assert "alembic" in _modules_after(tmp_path, "works", "list", FPTRACK_CACHE_DIR="")


def test_the_kept_head_still_tells_an_uninitialised_database(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert fptrack(tmp_path / "a", "init", FPTRACK_CACHE_DIR=str(cache)).returncode == 0
    assert fptrack(tmp_path / "a", "works", "list", FPTRACK_CACHE_DIR=str(cache)).returncode == 0
    assert list(cache.glob("schema-head-*"))
    assert_clean_error(
        fptrack(tmp_path / "b", "works", "list", FPTRACK_CACHE_DIR=str(cache)),
        "not initialised",
        "fptrack init",
    )


def test_a_crawl_does_not_load_scrapys_remote_control_or_telnet(tmp_path: Path) -> None:
    """Both are off in every crawl; a class named in Scrapy's extension settings is imported even when mapped
    off, so they are left out of the base list (the remote control's import brings aiohttp: 0.4 s)."""
    from testbed.sites import Page, serve_site

    assert fptrack(tmp_path, "init").returncode == 0
    with serve_site({"/": Page.html("<html><body><p>一页。</p></body></html>")}) as base:
        modules = _modules_after(
            tmp_path, "crawl", base + "/", "--depth", "0", "-q", FPTRACK_ALLOW_PRIVATE_HOSTS="127.0.0.1"
        )
    assert "scrapy.crawler" in modules and "fptrack.crawler.runner" in modules  # it did crawl
    unwanted = ("aiohttp", "scrapy.extensions.remote_control", "scrapy.extensions.telnet", "twisted.conch")
    assert not modules & set(unwanted), modules & set(unwanted)
