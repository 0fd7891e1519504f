"""The chapter side of the code index in memory (compare.chapter_index) on real databases (SQLite and
PostgreSQL): the same pairs and the same verdicts as the database path, registrations and removals made by
other sessions and other processes seen by the next batch, and the memory-mapped files shared by a worker's
processes."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import chapter_index, service
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.storage.code_index import code_holder_pairs
from fptrack.storage.db import create_engine_for
from fptrack.storage.fingerprints import FingerprintSet, write_fingerprints
from fptrack.storage.housekeeping import delete_works
from fptrack.storage.index import DEFAULT_LAYOUT
from fptrack.storage.models import Chapter, Fingerprint, Page, Work

KINDS = ("winnow", "winnow_py")
REPO_PARENT = Path(__file__).resolve().parents[4]  # the folder holding the package ``fptrack``


@pytest.fixture(autouse=True)
def _memory_mode() -> Iterator[None]:
    chapter_index.configure(mode="memory")
    yield
    chapter_index.configure()


def _random_work(session: Session, rng: random.Random, pool: list[int]) -> int:
    work = Work(title="w", content_sha256=uuid.uuid4().hex, text="x")
    session.add(work)
    session.flush()
    chapters = [
        Chapter(work_id=work.id, index=i, title=f"c{i}", start=0, end=1, text="x")
        for i in range(rng.randint(1, 6))
    ]
    session.add_all(chapters)
    session.flush()
    items = []
    for chapter in chapters:
        codes = {kind: [(rng.choice(pool), p) for p in range(rng.randint(0, 300))] for kind in KINDS}
        items.append(FingerprintSet(chapter.id, None, codes))
    write_fingerprints(session, owner="chapter", layout=DEFAULT_LAYOUT, items=items)
    return work.id


def _assert_same_pairs(session: Session, queries: list[int]) -> None:
    for kind in KINDS:
        expected = code_holder_pairs(session, kind, queries, owner="chapter")
        assert np.array_equal(chapter_index.chapter_holder_pairs(session, kind, queries), expected)


def test_random_registries_give_the_same_pairs(session: Session) -> None:
    rng = random.Random(20)
    pool = [rng.randint(-(2**63), 2**63 - 1) for _ in range(2000)]
    works: list[int] = []
    for step in range(30):
        action = rng.random()
        if action < 0.55 or not works:
            works.append(_random_work(session, rng, pool))
        elif action < 0.75:
            delete_works(session, [works.pop(rng.randrange(len(works)))])
        if step % 3 == 0:
            session.commit()
        _assert_same_pairs(
            session, rng.sample(pool, 500) + [rng.randint(-(2**63), 2**63 - 1) for _ in range(50)]
        )
    index = chapter_index.snapshot(session).index
    assert index.loads >= 2 and index.appends >= 5  # both the deltas and the reloads were exercised


def _register_demo(engine: Engine, settings: Settings, name: str) -> int:
    with Session(engine) as session:
        work = register_work_file(session, DEMO_DATA / name)
        service.index_work(session, work.work_id, settings)
        session.commit()
        return work.work_id


def _chapters_found(session: Session, settings: Settings, text: str) -> list[int]:
    verdicts = service.compare_document(session, service.fingerprint_text(text), settings)
    session.rollback()  # end the read transaction: the next batch sees what others committed since
    return [v.chapter_index for v in verdicts if v.flagged]


def test_registrations_and_removals_of_other_sessions_are_seen_by_the_next_batch(
    settings: Settings, engine: Engine
) -> None:
    """Session A compares while engine B (its own connections, as another worker) registers and removes works:
    uncommitted registrations are not seen, committed ones are, at the next compare."""
    other = create_engine_for(settings)
    page = "首页 > 小说\n" + demo_chapters("lighthouse.txt")[1] + "\n上一章 下一章"
    try:
        _register_demo(other, settings, "alley.txt")
        with Session(engine) as reader:
            assert _chapters_found(reader, settings, page) == []
            with Session(other) as writer:  # registered, not committed
                work = register_work_file(writer, DEMO_DATA / "lighthouse.txt")
                service.index_work(writer, work.work_id, settings)
                writer.flush()
                assert _chapters_found(reader, settings, page) == []
                writer.commit()
            assert _chapters_found(reader, settings, page) == [2]
            index = chapter_index.snapshot(reader).index
            assert index.appends == 1 and index.loads == 2  # a delta; the two kinds loaded once each
            with Session(other) as writer:
                delete_works(writer, [work.work_id])
                writer.commit()
            assert _chapters_found(reader, settings, page) == []
            assert index.loads == 4  # the removal reloaded both kinds
    finally:
        other.dispose()


@pytest.mark.postgres
def test_a_work_registered_by_another_process_is_found_by_the_next_batch(postgres_settings: Settings) -> None:
    engine = create_engine_for(postgres_settings)
    page = demo_chapters("rainy_night.txt")[0]
    script = (
        "import sys\n"
        "from sqlalchemy.orm import Session\n"
        "from fptrack.cli.demo import DEMO_DATA\n"
        "from fptrack.compare import service\n"
        "from fptrack.compare.works import register_work_file\n"
        "from fptrack.core.settings import Settings\n"
        "from fptrack.storage.db import create_engine_for\n"
        "settings = Settings(database_url=sys.argv[1])\n"
        "with Session(create_engine_for(settings)) as session:\n"
        "    work = register_work_file(session, DEMO_DATA / 'rainy_night.txt')\n"
        "    service.index_work(session, work.work_id, settings)\n"
        "    session.commit()\n"
    )
    try:
        _register_demo(engine, postgres_settings, "alley.txt")
        with Session(engine) as reader:
            assert _chapters_found(reader, postgres_settings, page) == []
            subprocess.run(
                [sys.executable, "-c", script, postgres_settings.database_url],
                check=True,
                cwd=REPO_PARENT,
                timeout=120,
            )
            assert _chapters_found(reader, postgres_settings, page) == [1]
    finally:
        engine.dispose()


def test_memory_and_database_give_the_same_verdicts(session: Session, settings: Settings) -> None:
    for name in ("alley.txt", "lighthouse.txt", "rainy_night.txt"):
        work = register_work_file(session, DEMO_DATA / name)
        service.index_work(session, work.work_id, settings)
    session.commit()
    pages = [
        "首页\n" + chapter + "\n下一章"
        for name in ("alley.txt", "lighthouse.txt", "rainy_night.txt")
        for chapter in demo_chapters(name)
    ]
    pages.append((DEMO_DATA / "library_news.txt").read_text("utf-8"))
    pages.append(demo_chapters("alley.txt")[0][:120] + demo_chapters("lighthouse.txt")[2][-150:])
    documents = [service.fingerprint_text(text) for text in pages]
    verdicts = {}
    for mode in ("database", "memory"):
        chapter_index.configure(mode=mode)
        verdicts[mode] = service._compare_batch(session, documents, settings)
    assert verdicts["memory"] == verdicts["database"]
    assert sum(1 for found in verdicts["memory"] if any(v.flagged for v in found)) >= 8


@pytest.mark.postgres
def test_a_large_registry_is_shared_through_files(
    postgres_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first process loads from the database and writes the files; the next maps them (no database load);
    a registration is a delta, a removal a reload written again, and the old version's files go."""
    monkeypatch.setattr(chapter_index, "FILE_MIN_PAIRS", 1)
    folder = tmp_path / "chapter-index"
    engine = create_engine_for(postgres_settings)
    rng = random.Random(7)
    pool = [rng.randint(-(2**63), 2**63 - 1) for _ in range(500)]
    queries = rng.sample(pool, 200)
    try:
        with Session(engine) as session:
            first = _random_work(session, rng, pool)
            _random_work(session, rng, pool)
            session.commit()
            chapter_index.configure(mode="memory", folder=folder)
            _assert_same_pairs(session, queries)
            assert chapter_index.snapshot(session).index.loads == 2
            assert len(list(folder.glob("*.npy"))) == 6  # codes, owners and directory of two kinds
            session.rollback()

            chapter_index.configure(mode="memory", folder=folder)  # as another process of the worker
            _assert_same_pairs(session, queries)
            index = chapter_index.snapshot(session).index
            assert (index.loads, index.file_loads) == (0, 2)
            main, _ = index.arrays(session, chapter_index.observe(session)[1], "winnow")
            assert isinstance(main.codes, np.memmap)

            _random_work(session, rng, pool)
            session.commit()
            _assert_same_pairs(session, queries)
            assert index.appends == 1
            delete_works(session, [first])
            session.commit()
            _assert_same_pairs(session, queries)
            assert index.loads == 2 and len(list(folder.glob("*.npy"))) == 6
    finally:
        engine.dispose()


def test_the_database_mode_asks_the_database(session: Session, settings: Settings) -> None:
    chapter_index.configure(mode="database")
    work = register_work_file(session, DEMO_DATA / "alley.txt")
    service.index_work(session, work.work_id, settings)
    found = service.compare_document(
        session, service.fingerprint_text(demo_chapters("alley.txt")[0]), settings
    )
    assert [v.chapter_index for v in found if v.flagged] == [1]
    assert chapter_index._indexes == {}  # nothing loaded


def _aggregate(session: Session) -> tuple[int, int, int]:
    row = session.execute(
        text(
            "SELECT count(*), coalesce(sum(id), 0), coalesce(max(id), 0) FROM fingerprints "
            "WHERE chapter_id IS NOT NULL"
        )
    ).one()
    return int(row[0]), int(row[1]), int(row[2])


def test_the_version_row_follows_the_chapters_fingerprints(session: Session) -> None:
    """registry_version, kept by triggers, says what aggregating over the chapters' rows says (count, id sum),
    through registrations, re-fingerprinting, removals and page writes, which leave it alone."""
    rng = random.Random(5)
    pool = [rng.getrandbits(63) for _ in range(300)]
    versions = [chapter_index.observe(session)[1]]
    works = [_random_work(session, rng, pool) for _ in range(3)]
    versions.append(chapter_index.observe(session)[1])
    assert versions[-1][:2] == _aggregate(session)[:2] and versions[-1][2] == _aggregate(session)[2]
    chapter = session.scalars(select(Chapter).where(Chapter.work_id == works[1])).first()
    assert chapter is not None
    write_fingerprints(
        session,
        owner="chapter",
        layout=DEFAULT_LAYOUT,
        items=[FingerprintSet(chapter.id, None, {kind: [(pool[0], 0), (pool[1], 5)] for kind in KINDS})],
    )
    versions.append(chapter_index.observe(session)[1])
    assert versions[-1][:2] == _aggregate(session)[:2]
    delete_works(session, [works[0]])
    versions.append(chapter_index.observe(session)[1])
    assert versions[-1][:2] == _aggregate(session)[:2]
    assert len(set(versions)) == len(versions)  # every change moved it
    page = Page(
        url="http://127.0.0.1/p", final_url="http://127.0.0.1/p", host="127.0.0.1", status=200, text="t"
    )
    session.add(page)
    session.flush()
    session.add(Fingerprint(page_id=page.id, kind="simhash64", value=7))
    session.flush()
    assert chapter_index.observe(session)[1] == versions[-1]
