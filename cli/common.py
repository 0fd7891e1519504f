"""What every command of the CLI shares: the context object, the one error wrapper, the table printer, and a
standard output that a closed pipe does not turn into an error.

Every command module imports this one and nothing else of ``cli`` (the root group, :mod:`cli.main`, imports
the command modules): no module of the package imports one that imports it back.
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import click
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.jobs.bootstrap import open_sessions
from fptrack.storage.db import session_scope

if TYPE_CHECKING:
    from fptrack.storage.models import Site

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "CliContext",
    "CliError",
    "bom_option",
    "echo_csv",
    "echo_error",
    "echo_warning",
    "friendly_errors",
    "friendly_errors_also",
    "interval_text",
    "known_errors",
    "pass_context",
    "print_table",
    "private_site_warning",
    "schedule_text",
    "stdout_closed_quietly",
]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(FptrackError, click.ClickException):
    """A one-line error for the user: ``error: <message>`` on stderr, exit status 1."""

    exit_code = EXIT_FAILURE

    def show(self, file: Any = None) -> None:
        echo_error(self.format_message())


def echo_error(message: str) -> None:
    """``error: <message>`` on stderr, the prefix in bold red, as :class:`CliError` shows it (for a failure
    that does not end the command, e.g. one file of several)."""
    click.echo(click.style("error: ", fg="red", bold=True) + message, err=True)


def echo_warning(message: str) -> None:
    """``warning: <message>`` on stderr, the prefix in bold yellow."""
    click.echo(click.style("warning: ", fg="yellow", bold=True) + message, err=True)


def private_site_warning(site: Site, how: str = "") -> str:
    """The warning (or ``""``) for a monitored site whose start URLs are on private or loopback addresses it
    may not reach: the private-address guard would refuse every crawl of it. ``how``: another way to allow it,
    said in brackets after ``fptrack sites edit NAME --allow-private``."""
    from fptrack.jobs.sites import private_start_hosts

    hosts = private_start_hosts(site)
    if not hosts:
        return ""
    return (
        f"{', '.join(hosts)} is a private or loopback address: crawls of {site.name} will be refused; allow "
        f"it with `fptrack sites edit {site.name} --allow-private`" + (f" ({how})" if how else "")
    )


def schedule_text(schedule: str) -> str:
    """A stored schedule as a person reads it: ``'120'`` -> ``'every 2m'``, a cron expression -> ``'cron 0 3 *
    * * (UTC)'``, none -> ``'manual'``."""
    if not schedule:
        return "manual"
    if schedule.isdigit():
        return f"every {interval_text(int(schedule))}"
    return f"cron {schedule} (UTC)"


def interval_text(seconds: float) -> str:
    """``7200`` -> ``'2h'``, ``90`` -> ``'90s'``: an interval as a person reads it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def known_errors() -> tuple[type[BaseException], ...]:
    """The errors a person can act on: :class:`FptrackError` and those that do not derive from it yet.

    Imported when an error is being matched, not when the CLI starts (an ``except`` clause evaluates its
    expression only then)."""
    from fptrack.fingerprint.encoding import UndecodableError

    # WorkError, CrawlError, SiteError, RecheckError, ConfigurationError and the database's errors derive from
    # FptrackError; the pure fingerprint package imports nothing of ours, so its error is named on its own
    return (FptrackError, UndecodableError)


def _one_line_errors(command: F, also: tuple[type[Exception], ...]) -> F:
    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except also as error:
            raise CliError(str(error)) from None
        except known_errors() as error:
            raise CliError(str(error)) from None
        except KeyboardInterrupt:
            raise CliError("interrupted") from None
        except Exception as error:
            if os.environ.get("FPTRACK_DEBUG"):
                raise
            raise CliError(
                f"unexpected {type(error).__name__}: {error} (set FPTRACK_DEBUG=1 to see the traceback)"
            ) from None

    return wrapper  # type: ignore[return-value]


def friendly_errors(command: F) -> F:
    """Turn the errors a person can act on (:func:`known_errors`) into :class:`CliError`, Ctrl+C into
    ``error: interrupted``; hide the traceback of anything else (shown with ``FPTRACK_DEBUG=1``)."""
    return _one_line_errors(command, ())


def friendly_errors_also(*kinds: type[Exception]) -> Callable[[F], F]:
    """:func:`friendly_errors` that also makes these built-in kinds one line (the account services signal a
    bad name or password with ``ValueError`` and an unknown one with ``LookupError``)."""

    def decorate(command: F) -> F:
        return _one_line_errors(command, kinds)

    return decorate


@dataclass
class CliContext:
    """What every subcommand needs: the settings, built once by the root group; the database, opened on first
    use (a command that needs none, such as ``beat`` or ``healthz``, never touches it)."""

    settings: Settings
    _sessions: sessionmaker[Session] | None = field(default=None, init=False, repr=False)

    def sessions(self, *, require_schema: bool = True) -> sessionmaker[Session]:
        if self._sessions is None:
            self._sessions = open_sessions(self.settings, require_schema=require_schema)
        return self._sessions

    @contextmanager
    def session(self) -> Iterator[Session]:
        with session_scope(self.sessions()) as session:
            yield session

    def tasks(self) -> ModuleType:
        """The Celery tasks, configured with these settings, once the database is known to be ready."""
        from fptrack.jobs import tasks

        self.sessions()  # fail early, with a clear message, when the database is not ready
        tasks.configure(self.settings)
        return tasks


pass_context = click.make_pass_decorator(CliContext)


def print_table(headers: list[str], rows: list[tuple[Any, ...]]) -> None:
    """Columns aligned for the terminal: CJK characters count two columns, cells are clipped at 60."""

    def width(value: str) -> int:
        return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in value)

    def clip(value: str, limit: int = 60) -> str:
        out, used = "", 0
        for ch in value:
            w = width(ch)
            if used + w > limit:
                return out + "…"
            out, used = out + ch, used + w
        return out

    cells = [[clip(str(c)) for c in row] for row in rows]
    widths = [max([width(h)] + [width(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h + " " * (widths[i] - width(h)) for i, h in enumerate(headers))
    click.echo(line.rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(c + " " * (widths[i] - width(c)) for i, c in enumerate(row)).rstrip())


def bom_option(command: F) -> F:
    """``--bom/--no-bom`` for a command that writes CSV: a UTF-8 byte order mark first, by default."""
    return click.option(
        "--bom/--no-bom",
        default=True,
        help="CSV: start with a UTF-8 byte order mark, without which Excel (on Chinese Windows too) garbles "
        "Chinese text [--bom].",
    )(command)


def echo_csv(columns: Sequence[str], rows: Iterable[Mapping[str, object]], *, bom: bool) -> None:
    """Every CSV the command line writes: the header and the rows on stdout (``services.exports.csv_lines``,
    cells a spreadsheet would run made safe), a byte order mark first when ``bom``."""
    from fptrack.services.exports import csv_lines

    for line in csv_lines(columns, rows, bom=bom):
        click.echo(line, nl=False)


class _ClosedPipeGuard:
    """Standard output as the commands see it: once its reader has gone (``fptrack check ... | head -3``), the
    rest of the output is dropped instead of raising ``BrokenPipeError``, so the command runs to its end and
    exits with the status it would have had (3 for a copy found, 1 for a failed crawl...).

    The descriptor itself is pointed at ``/dev/null`` (Python's own recipe for EPIPE): what is still buffered
    in the real stream would otherwise fail again, as "Exception ignored", when the interpreter flushes it at
    exit. Everything but writing is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _to_devnull(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError):  # no descriptor (a test's stream): write to /dev/null from now on
            self._stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - as long as the process
        finally:
            os.close(devnull)


@contextmanager
def stdout_closed_quietly() -> Iterator[None]:
    """While the block runs, a closed standard output (a pipe whose reader exited) ends the output quietly,
    not the command (:class:`_ClosedPipeGuard`)."""
    original = sys.stdout
    sys.stdout = _ClosedPipeGuard(original)
    try:
        yield
    finally:
        sys.stdout = original
