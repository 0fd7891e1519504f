"""Logging configured once by the command line: stderr, WARNING by default, INFO with -v, DEBUG with -vv,
ERROR with -q; what a command prints on stdout is the same at every level."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from click.testing import CliRunner

from fptrack.cli.main import configure_logging, main
from tests.support.cli import fptrack

MIGRATION_LINE = re.compile(
    r"^\d\d:\d\d:\d\d INFO alembic\.runtime\.migration: Running upgrade", re.MULTILINE
)


def test_the_level_follows_v_and_q_and_stdout_stays_the_same(tmp_path: Path) -> None:
    runs = {
        flags: fptrack(tmp_path / (flags or "plain"), *flags.split(), "init") for flags in ("", "-v", "-q")
    }
    assert {flags: run.returncode for flags, run in runs.items()} == {"": 0, "-v": 0, "-q": 0}
    # the migrations' INFO lines, in the concise format, only with -v
    assert MIGRATION_LINE.search(runs["-v"].stderr), runs["-v"].stderr
    assert " INFO " not in runs[""].stderr and " INFO " not in runs["-q"].stderr
    normalised = {
        flags: run.stdout.replace(str(tmp_path / (flags or "plain")), "<dir>") for flags, run in runs.items()
    }
    assert normalised["-v"] == normalised[""] == normalised["-q"] and normalised[""]


def test_verbose_and_quiet_set_the_root_level_once(tmp_path: Path) -> None:
    runner = CliRunner()
    root = logging.getLogger()
    kept = (root.level, list(root.handlers))
    try:
        levels = [
            ([], logging.WARNING),
            (["-v"], logging.INFO),
            (["-vv"], logging.DEBUG),
            (["--verbose", "--verbose", "-v"], logging.DEBUG),
            (["-q"], logging.ERROR),
        ]
        for flags, level in levels:
            result = runner.invoke(main, [*flags, "--data-dir", str(tmp_path), "works", "list", "--help"])
            assert result.exit_code == 0, result.output
            assert root.level == level, flags
            ours = [h for h in root.handlers if type(h).__name__ == "_CliLogHandler"]
            assert [h.level for h in ours] == [level], flags  # one handler, however often main runs
        refused = runner.invoke(main, ["-v", "-q", "--data-dir", str(tmp_path), "works", "list"])
        assert refused.exit_code != 0 and "cannot be used together" in refused.output
    finally:
        for handler in [h for h in root.handlers if h not in kept[1]]:
            root.removeHandler(handler)
        root.setLevel(kept[0])


def test_configure_logging_levels() -> None:
    root = logging.getLogger()
    kept = (root.level, list(root.handlers))
    try:
        levels = [configure_logging(verbosity) for verbosity in (-1, 0, 1, 2, 5)]
        assert levels == [logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG, logging.DEBUG]
    finally:
        for handler in [h for h in root.handlers if h not in kept[1]]:
            root.removeHandler(handler)
        root.setLevel(kept[0])
