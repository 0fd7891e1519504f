"""The root of the ``fptrack`` command line: the group, its global options, and every command attached to it.

The commands live in a module per group (:mod:`cli.works`, :mod:`cli.crawl`, :mod:`cli.matches`,
:mod:`cli.processes`, :mod:`cli.database`, :mod:`cli.sites`, :mod:`cli.users`, :mod:`cli.takedowns`,
:mod:`cli.demo`, ...) and share :mod:`cli.common`; this module is the only one that imports them (by name,
through :data:`COMMAND_MODULES`), and none imports it. A command's module is imported only when that command
runs or a listing needs it (``fptrack --help``): ``fptrack crawl`` does not pay for the admin's Flask, the
takedown statistics' numpy or the notices' templates (start-up is part of every crawl's wall time).
The console script ``fptrack`` and ``python -m fptrack.cli`` run :func:`main`.

Logging is configured here, once per process: to stderr, WARNING by default, INFO with ``-v``, DEBUG with
``-vv``, ERROR with ``-q``; what commands print on stdout does not change.

Errors a person can act on (a missing file, an unreachable URL, a malformed database URL, an uninitialised
database) end in one line on stderr and a non-zero exit status, never a traceback; set ``FPTRACK_DEBUG=1`` to
see the traceback of an unexpected failure.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from fptrack.cli.common import CliContext, CliError, stdout_closed_quietly
from fptrack.core.settings import ConfigurationError, Settings

__all__ = ["COMMAND_MODULES", "LOG_FORMAT", "LazyGroup", "configure_logging", "main"]

COMMAND_MODULES: Mapping[str, tuple[str, ...]] = {
    "fptrack.cli.crawl": ("crawl",),
    "fptrack.cli.database": ("init", "analytics", "maintain", "db"),
    "fptrack.cli.demo": ("demo",),
    "fptrack.cli.discover": ("discover", "candidates"),
    "fptrack.cli.evidence": ("evidence",),
    "fptrack.cli.leads": ("leads",),
    "fptrack.cli.matches": ("check", "matches", "report"),
    "fptrack.cli.meaning": ("meaning",),
    "fptrack.cli.networks": ("networks",),
    "fptrack.cli.notices": ("notices",),
    "fptrack.cli.processes": ("serve", "worker", "crawler", "beat", "ping", "healthz"),
    "fptrack.cli.senders": ("senders", "contacts"),
    "fptrack.cli.sites": ("sites",),
    "fptrack.cli.takedowns": ("takedowns",),
    "fptrack.cli.users": ("users", "review"),
    "fptrack.cli.works": ("works",),
}
"""Every command of ``fptrack``, by the module that defines it: each name is both the command's name and the
module attribute holding it."""


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _CliLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The command line's stderr handler (one per process: configuring again replaces it)."""


def configure_logging(verbosity: int) -> int:
    """Send log records to stderr at the level ``verbosity`` names (-1 ERROR, 0 WARNING, 1 INFO, 2 and more
    DEBUG); returns the level."""
    level = (
        logging.ERROR
        if verbosity < 0
        else (logging.WARNING, logging.INFO)[verbosity]
        if verbosity < 2
        else logging.DEBUG
    )
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _CliLogHandler)]:
        root.removeHandler(handler)
    handler = _CliLogHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%H:%M:%S"))
    handler.setLevel(level)  # Scrapy sets the root's level to NOTSET when it starts
    root.addHandler(handler)
    root.setLevel(level)
    return level


class LazyGroup(click.Group):
    """A click group that imports a command's module when the command is looked up, not when the group is
    made (click's "lazily loading subcommands" pattern).

    ``lazy_commands`` maps each command name to its module (the command is the module's attribute of that
    name). Listing the commands (``--help``) imports them all, for their short help; running one imports its
    module only."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], **attrs: Any) -> None:
        super().__init__(*args, **attrs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self.lazy_commands.get(cmd_name)
        if module is None or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        command = getattr(importlib.import_module(module), cmd_name)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}.{cmd_name} is not a click command")
        self.add_command(command, cmd_name)  # looked up once
        return command


@click.group(
    cls=LazyGroup,
    lazy_commands={name: module for module, names in COMMAND_MODULES.items() for name in names},
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the embedded database (default: $FPTRACK_DATA_DIR or ./fptrack-data).",
)
@click.option("-v", "--verbose", count=True, help="More log lines on stderr: -v for INFO, -vv for DEBUG.")
@click.option("-q", "--quiet", is_flag=True, help="Only errors in the log on stderr.")
@click.version_option(package_name="fptrack")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, verbose: int, quiet: bool) -> None:
    """fptrack: find pirated copies of registered texts on the web.

    \b
    Typical session:
      fptrack init                         create or migrate the database
      fptrack works add novel.txt          register a work (UTF-8, GB18030/GBK or Big5)
      fptrack crawl http://site/ --depth 3 crawl, fingerprint and compare
      fptrack matches --format json        the flagged matches
      fptrack serve                        review them in the admin web app

    Configuration comes from the environment: FPTRACK_DATABASE_URL (default: a SQLite file in the data
    folder; postgresql://... for production), FPTRACK_BROKER_URL (unset: tasks run in-process; redis://...
    to use Celery workers started with `fptrack worker`). See the README for all variables.
    """
    # At the exit, every object left is frozen before the interpreter's last collections, which would walk
    # them all to find nothing that the process's end does not free anyway: 0.34 s -> 0.11 s at the end of a
    # 1,000-page crawl.
    atexit.register(gc.freeze)
    if verbose and quiet:
        raise CliError("-v/--verbose and -q/--quiet cannot be used together")
    configure_logging(-1 if quiet else verbose)
    # `fptrack ... | head` must end the way the command would have ended, not in a BrokenPipeError
    ctx.with_resource(stdout_closed_quietly())
    environ = dict(os.environ)
    if data_dir is not None:
        environ["FPTRACK_DATA_DIR"] = str(data_dir)
    try:
        settings = Settings.from_env(environ)
    except ConfigurationError as error:
        raise CliError(str(error)) from None
    from fptrack.jobs.bootstrap import prepare_process

    prepare_process(settings)
    ctx.obj = CliContext(settings)
