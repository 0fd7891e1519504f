"""The root of the ``fptrack`` command line: the group, its global options, and every command attached to it.

The commands live in a module per group (:mod:`cli.works`, :mod:`cli.crawl`, :mod:`cli.matches`,
:mod:`cli.processes`, :mod:`cli.database`, :mod:`cli.sites`, :mod:`cli.users`, :mod:`cli.takedowns`,
:mod:`cli.demo`) and share :mod:`cli.common`; this module is the only one that imports them, and none
imports it.
The console script ``fptrack`` and ``python -m fptrack.cli`` run :func:`main`.

Errors a person can act on (a missing file, an unreachable URL, a malformed database URL, an uninitialised
database) end in one line on stderr and a non-zero exit status, never a traceback; set ``FPTRACK_DEBUG=1`` to
see the traceback of an unexpected failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from fptrack.cli.common import CliContext, CliError, stdout_closed_quietly
from fptrack.cli.crawl import crawl
from fptrack.cli.database import analytics, init, maintain
from fptrack.cli.demo import demo
from fptrack.cli.discover import candidates, discover
from fptrack.cli.evidence import evidence
from fptrack.cli.matches import check, matches, report
from fptrack.cli.networks import networks
from fptrack.cli.notices import notices
from fptrack.cli.processes import beat, crawler, healthz, ping, serve, worker
from fptrack.cli.senders import contacts, senders
from fptrack.cli.sites import sites
from fptrack.cli.takedowns import takedowns
from fptrack.cli.users import review, users
from fptrack.cli.works import works
from fptrack.core.settings import ConfigurationError, Settings

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the embedded database (default: $FPTRACK_DATA_DIR or ./fptrack-data).",
)
@click.version_option(package_name="fptrack")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None) -> None:
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
    # `fptrack ... | head` must end the way the command would have ended, not in a BrokenPipeError
    ctx.with_resource(stdout_closed_quietly())
    environ = dict(os.environ)
    if data_dir is not None:
        environ["FPTRACK_DATA_DIR"] = str(data_dir)
    try:
        settings = Settings.from_env(environ)
    except ConfigurationError as error:
        raise CliError(str(error)) from None
    from fptrack.compare import chapter_index
    from fptrack.fingerprint.normalize import use_table_cache

    use_table_cache(settings.cache_dir)
    chapter_index.configure(settings)
    ctx.obj = CliContext(settings)


for command in (init, works, crawl, check, matches, report, analytics, maintain, serve, worker, crawler, beat,
                ping, healthz, demo, users, review, sites, takedowns):  # fmt: skip
    main.add_command(command)
for command in (discover, candidates, networks):
    main.add_command(command)
main.add_command(evidence)
for command in (senders, contacts, notices):
    main.add_command(command)
