"""What a newcomer met and should not again: `make up` reinstalling after `make install-test`, works too short
to be found registered without a word, no way to remove a work, `fptrack check ... | head` ending in
BrokenPipeError, and the Procfile naming a variable that nothing reads."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.fingerprint.contract import CONTRACT
from fptrack.storage.housekeeping import count_orphans
from fptrack.storage.models import (
    CODE_OWNER_CHAPTER,
    Chapter,
    CodeIndexRow,
    Fingerprint,
    Match,
    MatchRollup,
    Page,
    PageCodes,
    ReviewDecision,
    TakedownCheck,
    Work,
)
from tests.support.env import clean_environ

REPO = Path(__file__).resolve().parents[3]


def _fptrack(
    data_dir: Path, *args: str, stdout: int | None = subprocess.PIPE, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = clean_environ()
    environ.update(FPTRACK_DATA_DIR=str(data_dir), **env)
    return subprocess.run(
        [sys.executable, "-m", "fptrack.cli", *args],
        env=environ,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


def _lines(stream: str, prefix: str) -> list[str]:
    return [line for line in stream.splitlines() if line.startswith(prefix)]


# ------------------------------------------------------------------------------------------------- make


def test_install_test_marks_the_deploy_extras_installed_so_make_up_does_not_reinstall(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 0\n")  # a `pip install` that installs nothing: the markers matter here
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    make = ["make", "--no-print-directory", "-C", str(REPO), f"VENV={venv}"]
    installed = subprocess.run([*make, "install-test"], capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stderr

    planned = subprocess.run([*make, "-n", "up"], capture_output=True, text=True, check=False)
    assert planned.returncode == 0, planned.stderr
    assert "process_set.py up" in planned.stdout
    assert "pip install" not in planned.stdout, planned.stdout


# --------------------------------------------------------------------------------------- too short to find


def test_works_add_warns_once_per_work_whose_chapters_no_copy_can_be_flagged_for(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _fptrack(data, "init").returncode == 0
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("第一章 开端\n他来了。\n\n第二章 结局\n他走了。\n", encoding="utf-8")
    with_note = tmp_path / "with-note.txt"
    with_note.write_text(
        (DEMO_DATA / "lighthouse.txt").read_text("utf-8") + "\n\n第四章 后记\n全书完。\n", "utf-8"
    )

    result = _fptrack(data, "works", "add", str(tiny), str(DEMO_DATA / "alley.txt"), str(with_note))

    assert result.returncode == 0, result.stderr
    assert len(_lines(result.stdout, "registered work #")) == 3  # registered all the same
    warnings = _lines(result.stderr, "warning: ")
    assert len(warnings) == 2, result.stderr
    least = CONTRACT.rule.min_copied
    assert all(f"fewer than {least} letters and digits" in warning for warning in warnings)
    assert "work #1 'tiny': every chapter" in warnings[0]
    assert "work #3 '灯塔守望人': 1 of 4 chapters (4)" in warnings[1]
    assert "Traceback" not in result.stderr and not _lines(result.stderr, "error: ")


# ------------------------------------------------------------------------------------------- works remove


def _count(session: Session, model: type, *where: object) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def test_works_remove_keeps_evidence_unless_told_and_leaves_nothing_dangling(
    session: Session, settings: Settings, tmp_path: Path
) -> None:
    copied = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    other = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, copied.work_id, settings)
    service.index_work(session, other.work_id, settings)
    text = demo_chapters("lighthouse.txt")[1]
    url = "http://pirate.example/2.html"
    page = Page(url=url, final_url=url, host="pirate.example", status=200, title="t", text=text)
    session.add(page)
    session.flush()
    service.process_pages(session, [page.id], settings)
    match = session.scalars(select(Match).where(Match.page_id == page.id)).one()
    session.add_all(
        [
            ReviewDecision(match_id=match.id, decision="confirmed", reviewer="alice"),
            TakedownCheck(match_id=match.id, outcome="present", http_status=200),
        ]
    )
    session.commit()
    page_id, page_codes = page.id, _count(session, PageCodes, PageCodes.page_id == page.id)
    assert _count(session, CodeIndexRow, CodeIndexRow.owner == CODE_OWNER_CHAPTER) > 0
    database = {"FPTRACK_DATABASE_URL": settings.database_url}
    data = tmp_path / "cli-data"

    refused = _fptrack(data, "works", "remove", str(copied.work_id), str(other.work_id), **database)
    assert refused.returncode == 1
    refusal = (
        f"error: work #{copied.work_id} '灯塔守望人' has 1 match(es), evidence with their reviews and "
        "takedown history: not removed (--with-matches removes them too)"
    )
    assert _lines(refused.stderr, "error: ") == [refusal], refused.stderr
    assert f"removed work #{other.work_id} '青石巷': 3 chapter(s) with their fingerprints\n" == refused.stdout
    session.expire_all()
    assert session.scalars(select(Work.id)).all() == [copied.work_id]
    assert [_count(session, model) for model in (Match, ReviewDecision, TakedownCheck)] == [1, 1, 1]

    removed = _fptrack(data, "works", "remove", str(copied.work_id), "--with-matches", **database)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == (
        f"removed work #{copied.work_id} '灯塔守望人': 3 chapter(s) with their fingerprints "
        "and 1 match(es) with their reviews and takedown history\n"
    )
    session.expire_all()
    for model in (Work, Chapter, Match, ReviewDecision, TakedownCheck, MatchRollup):
        assert _count(session, model) == 0, model
    assert _count(session, Fingerprint, Fingerprint.chapter_id.is_not(None)) == 0
    assert _count(session, CodeIndexRow, CodeIndexRow.owner == CODE_OWNER_CHAPTER) == 0
    # the page and its codes are the crawl's: they stay
    assert session.get(Page, page_id) is not None
    assert _count(session, PageCodes, PageCodes.page_id == page_id) == page_codes == 1
    assert set(count_orphans(session).values()) == {0}

    again = _fptrack(data, "works", "remove", str(copied.work_id), **database)
    assert again.returncode == 1
    missing = f"error: there is no work #{copied.work_id}; see `fptrack works list`"
    assert _lines(again.stderr, "error: ") == [missing]


# ---------------------------------------------------------------------------------------------- | head


@pytest.fixture
def registered(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    assert _fptrack(data, "init").returncode == 0
    assert _fptrack(data, "works", "add", str(DEMO_DATA / "lighthouse.txt")).returncode == 0
    return data


def _into_closed_pipe(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``fptrack ARGS | head -0``: standard output is a pipe whose reader has already gone."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return _fptrack(data, *args, stdout=writer)
    finally:
        os.close(writer)


@pytest.mark.parametrize("copies", [True, False])
def test_a_closed_stdout_ends_quietly_with_the_exit_status_of_the_command(
    registered: Path, tmp_path: Path, copies: bool
) -> None:
    suspect = tmp_path / "suspect.txt"
    suspect.write_text(
        demo_chapters("lighthouse.txt")[1] if copies else "今天天气很好，我们去公园散步。" * 20, "utf-8"
    )

    checked = _into_closed_pipe(registered, "check", str(suspect))
    assert checked.returncode == (3 if copies else 0)
    assert checked.stderr == ""

    listed = _into_closed_pipe(registered, "works", "list")
    assert (listed.returncode, listed.stderr) == (0, "")


# ---------------------------------------------------------------------------------------------- Procfile


def test_the_procfile_comments_name_only_variables_that_are_read() -> None:
    """deploy/process_set.py reads what `make up` passes to honcho; fptrack reads its FPTRACK_ settings."""
    comments = "\n".join(
        line for line in (REPO / "deploy" / "Procfile").read_text().splitlines() if line.startswith("#")
    )
    named = set(re.findall(r"\b([A-Z][A-Z0-9_]{2,})=", comments))
    assert named, "the Procfile's comment shows how to run more processes of one kind"
    readers = (REPO / "deploy" / "process_set.py").read_text() + (REPO / "core" / "settings.py").read_text()
    assert {name for name in named if f'"{name}"' not in readers} == set()
