"""``fptrack matches`` and ``fptrack report`` with ids, statuses and CSV, through click's CliRunner on a
migrated SQLite database seeded with hostile crawled strings."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.compare.records import MATCH_FIELDS
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.models import Match, Page
from tests.support.admin_seed import T0, Seeded, seed

FORMULA_URL = '=HYPERLINK("http://evil.example","click")'


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def seeded(data_dir: Path) -> Seeded:
    settings = Settings(data_dir=data_dir)
    engine = create_engine_for(settings)
    try:
        migrate(settings, engine)
        with Session(engine, expire_on_commit=False) as session:
            found = seed(session)
        with Session(engine) as session:
            hostile = session.get(Match, found.hostile_match_id)
            assert hostile is not None
            page = Page(
                url=FORMULA_URL, final_url=FORMULA_URL, host="@evil", status=200, title="-1+1", text="x"
            )
            session.add(
                Match(
                    page=page,
                    work_id=hostile.work_id,
                    chapter_id=hostile.chapter_id,
                    score=0.5,
                    methods=["dna"],
                    spans=[[0, 1, 0, 1]],
                    status="flagged",
                    first_seen=T0,
                    last_seen=T0,
                )
            )
            session.commit()
        return found
    finally:
        engine.dispose()


def _run(data_dir: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_table_shows_ids_and_statuses(data_dir: Path, seeded: Seeded) -> None:
    lines = _run(data_dir, "matches", "--status", "all").splitlines()
    assert lines[0].split()[:3] == ["id", "status", "score"]
    rows = {line.split()[0]: line.split()[1] for line in lines[2:]}
    assert rows[str(seeded.hostile_match_id)] == "flagged"
    assert rows[str(seeded.plain_match_id)] == "licensed"
    assert rows[str(seeded.javascript_match_id)] == "dismissed"
    flagged = _run(data_dir, "matches").splitlines()[2:]
    assert {line.split()[1] for line in flagged} == {"flagged"}


def test_json_keeps_the_documented_fields_and_adds_id_and_status(data_dir: Path, seeded: Seeded) -> None:
    records = [
        json.loads(line)
        for line in _run(data_dir, "matches", "--format", "json", "--status", "all").splitlines()
    ]
    assert len(records) == 5
    for record in records:
        assert list(record) == [*MATCH_FIELDS, "id", "status"]
    by_id = {record["id"]: record for record in records}
    assert by_id[seeded.hostile_match_id]["status"] == "flagged"
    assert by_id[seeded.hostile_match_id]["page_url"].endswith("<script>alert(1)</script>")


def test_csv_has_ids_statuses_and_no_formulas(data_dir: Path, seeded: Seeded) -> None:
    out = _run(data_dir, "matches", "--format", "csv", "--status", "flagged", "--no-bom")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == [*MATCH_FIELDS, "id", "status"]
    urls = {row["page_url"] for row in rows}
    assert "'" + FORMULA_URL in urls and FORMULA_URL not in urls
    hostile = next(row for row in rows if row["id"] == str(seeded.hostile_match_id))
    assert hostile["status"] == "flagged" and json.loads(hostile["spans"])[0][0] >= 0
    assert all(not row[column].startswith(("=", "+", "-", "@")) for row in rows for column in row)


def test_report_as_csv(data_dir: Path, seeded: Seeded) -> None:
    out = _run(data_dir, "report", "--by", "host", "--format", "csv", "--no-bom")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["key", "flagged", "confirmed", "dismissed", "licensed", "pages", "total"]
    by_host = {row["key"]: row for row in rows}
    assert by_host["pirate.example"]["total"] == "2"
    assert by_host["'@evil"]["flagged"] == "1"  # a host that a spreadsheet would read as a formula
    assert by_host["<script>alert(1)</script>"]["dismissed"] == "1"


def test_csv_starts_with_a_byte_order_mark_unless_told_not_to(data_dir: Path, seeded: Seeded) -> None:
    commands = (
        ["matches", "--status", "all"],
        ["report", "--by", "work"],
        ["leads"],
        ["takedowns"],
        ["takedowns", "stats", "--by", "host"],
    )
    for command in commands:
        with_bom = _run(data_dir, *command, "--format", "csv")
        # what Excel needs to read UTF-8 (on Chinese Windows it reads GBK otherwise)
        assert with_bom.encode("utf-8")[:3] == b"\xef\xbb\xbf", command
        without = _run(data_dir, *command, "--format", "csv", "--no-bom")
        assert without == with_bom[1:], command
    header = _run(data_dir, "matches", "--format", "csv").splitlines()[0]
    assert header.removeprefix("\ufeff").split(",") == [*MATCH_FIELDS, "id", "status"]


def test_an_id_is_shown_whatever_its_status(data_dir: Path, seeded: Seeded) -> None:
    dismissed = str(seeded.javascript_match_id)
    rows = _run(data_dir, "matches", "--id", dismissed).splitlines()[2:]
    assert [row.split()[:2] for row in rows] == [[dismissed, "dismissed"]]
    records = [
        json.loads(line)
        for line in _run(data_dir, "matches", "--id", dismissed, "--format", "json").splitlines()
    ]
    assert [(r["id"], r["status"]) for r in records] == [(seeded.javascript_match_id, "dismissed")]
    # a status asked for still filters
    assert _run(data_dir, "matches", "--id", dismissed, "--status", "flagged").strip() == (
        "no matches with status flagged"
    )


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_an_unknown_id_is_a_one_line_error(data_dir: Path, seeded: Seeded, fmt: str) -> None:
    result = CliRunner().invoke(
        main,
        [
            "--data-dir",
            str(data_dir),
            "matches",
            "--id",
            str(seeded.hostile_match_id),
            "--id",
            "987654",
            "--format",
            fmt,
        ],
    )
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: no match with id 987654; `fptrack matches --status all` lists them all"
    ]
