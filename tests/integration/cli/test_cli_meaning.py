"""``fptrack matches`` on a copy that keeps the meaning (issue 36), through click's CliRunner on a migrated
SQLite database: the table names each match's kind (exact, rewrite, translation:en); ``--id`` prints the kind,
the coverage and the aligned sentence pairs in order; JSON carries kind and alignment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, migrate
from tests.support.admin_seed import SCRIPT, Seeded, seed
from tests.support.meaning_seed import CHAPTER_SENTENCES, PAGE_SENTENCES, add_meaning_match


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def meaning_id(data_dir: Path) -> tuple[Seeded, int]:
    settings = Settings(data_dir=data_dir)
    engine = create_engine_for(settings)
    try:
        migrate(settings, engine)
        with Session(engine, expire_on_commit=False) as session:
            found = seed(session)
        with Session(engine) as session:
            return found, add_meaning_match(session, found, status="flagged")
    finally:
        engine.dispose()


def _run(data_dir: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_table_names_the_kind(data_dir: Path, meaning_id: tuple[Seeded, int]) -> None:
    seeded, match_id = meaning_id
    lines = _run(data_dir, "matches", "--status", "all").splitlines()
    assert "kind" in lines[0].split()
    rows = {line.split()[0]: line for line in lines[2:]}
    assert "translation:en" in rows[str(match_id)] and "exact" in rows[str(seeded.hostile_match_id)]
    assert "aligned sentence pairs" not in "\n".join(lines)  # the pairs only with --id


def test_id_prints_the_kind_the_coverage_and_the_pairs_in_order(
    data_dir: Path, meaning_id: tuple[Seeded, int]
) -> None:
    _seeded, match_id = meaning_id
    output = _run(data_dir, "matches", "--id", str(match_id))
    assert (
        f"match {match_id}: Translation (English), 84% of the chapter covered; 2 aligned sentence pairs"
        in output
    )
    first, second = output.index("1. similarity 0.91"), output.index("2. similarity 0.87")
    assert first < output.index(PAGE_SENTENCES[0]) < output.index(CHAPTER_SENTENCES[0]) < second
    assert second < output.index(PAGE_SENTENCES[1]) < output.index(CHAPTER_SENTENCES[1])
    assert SCRIPT in output  # a terminal shows the crawled text as it is, on one line


def test_json_carries_kind_and_alignment(data_dir: Path, meaning_id: tuple[Seeded, int]) -> None:
    seeded, match_id = meaning_id
    output = _run(
        data_dir, "matches", "--id", str(match_id), "--id", str(seeded.hostile_match_id), "--format", "json"
    )
    records = {record["id"]: record for record in map(json.loads, output.splitlines())}
    assert records[match_id]["kind"] == "translation:en"
    assert (
        records[match_id]["alignment"]["coverage"] == 0.84
        and len(records[match_id]["alignment"]["pairs"]) == 2
    )
    assert (
        records[seeded.hostile_match_id]["kind"] is None
        and records[seeded.hostile_match_id]["alignment"] is None
    )


def test_a_sentence_is_one_line_without_control_characters() -> None:
    from fptrack.cli.matches import _one_line

    assert _one_line("a\n b\x1b[2J c\u0007") == "a b\ufffd[2J c\ufffd"
    long = _one_line("字" * 400)
    assert len(long) <= 160 and " … " in long


def test_works_add_says_when_pages_crawled_before_wait_for_the_meaning_check(tmp_path: Path) -> None:
    """In-process, the registration's retroactive gate leaves its checks to ``fptrack meaning run`` and says
    so (the model's minutes are not spent inside ``works add``)."""
    from fptrack.compare import service
    from fptrack.storage.models import Page
    from tests.integration.compare.test_meaning_pipeline import CHAPTER, NEAR_MISS

    data_dir = tmp_path / "data"
    _run(data_dir, "init")
    engine = create_engine_for(Settings(data_dir=data_dir))
    try:
        with Session(engine) as session:
            url = "http://127.0.0.1/early.html"
            page = Page(url=url, final_url=url, host="127.0.0.1", status=200, encoding="utf-8", title="t")
            page.text, page.content_sha256 = NEAR_MISS, "sha-early"
            session.add(page)
            session.flush()
            service.process_pages(session, [page.id], Settings(data_dir=data_dir))  # its codes stored
            session.commit()
    finally:
        engine.dispose()
    novel = tmp_path / "fengyu.txt"
    novel.write_text("风雨\n\n" + CHAPTER, encoding="utf-8")
    output = _run(data_dir, "works", "add", str(novel))
    assert "meaning path: 1 already-crawled page(s)" in output and "fptrack meaning run" in output
    assert "1 pending" in _run(data_dir, "meaning", "status")
