"""An existing database of the walking skeleton (revision 0001) upgrades to head without losing data, on both
backends: works, chapters, pages, fingerprints, code index rows and matches survive; pages gain their site;
the Simhash index answers from the expression indexes that replace 0001's table of index rows."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.code_index import code_holders
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.fingerprints import load_codes
from fptrack.storage.housekeeping import count_orphans
from fptrack.storage.index import DEFAULT_LAYOUT, to_signed64
from fptrack.storage.models import (
    CODE_OWNER_CHAPTER,
    CodeIndexRow,
    CrawlJob,
    Fingerprint,
    Match,
    Page,
    Site,
    Work,
)
from fptrack.storage.simhash_index import simhash_candidates
from testbed.services import reachable
from tests.conftest import POSTGRES_URL, _admin_engine, _pg_url

SIMHASH = 0xDEAD_BEEF_0BAD_F00D
NOW = "2026-01-02 03:04:05+00:00"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    if request.param == "sqlite":
        yield Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'old.db'}")
        return
    if not reachable(POSTGRES_URL, 5432):
        pytest.skip("PostgreSQL is not available")
    name = f"fptrack_test_{os.getpid()}_mig_{uuid.uuid4().hex[:6]}"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    yield Settings(data_dir=tmp_path, database_url=_pg_url(name))
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _skeleton_data(engine: Engine) -> None:
    """Rows as the skeleton (revision 0001) wrote them, including its table of Simhash index rows."""
    statements = [
        (
            "INSERT INTO works (id, title, source_name, encoding, content_sha256, text, created_at) "
            f"VALUES (1, '灯塔', 'a.txt', 'utf-8', 'sha-w', '第一章 灯塔 海风很大', '{NOW}')"
        ),
        (
            'INSERT INTO chapters (id, work_id, "index", title, start, "end", text) '
            "VALUES (10, 1, 1, '第一章 灯塔', 0, 10, '第一章 灯塔 海风很大')"
        ),
        (
            "INSERT INTO pages (id, url, final_url, host, status, encoding, title, text, content_sha256, "
            "snapshot_sha256, fetched_at) VALUES "
            f"(100, 'http://pirate.test/1', 'http://pirate.test/1', 'pirate.test', "
            f"200, 'gbk', 't', '海风很大', "
            f"'sha-p1', 'snap-1', '{NOW}'), "
            f"(101, 'http://pirate.test/2', 'http://pirate.test/2', 'pirate.test', "
            f"200, 'utf-8', 't', '无关', "
            f"'sha-p2', 'snap-2', '{NOW}'), "
            "(102, 'http://other.test/', 'http://other.test/', 'other.test', 404, '', '', '', '', '', "
            f"'{NOW}')"
        ),
        (
            "INSERT INTO fingerprints (id, chapter_id, page_id, kind, value, payload, created_at) VALUES "
            f"(1000, 10, NULL, 'simhash64', {to_signed64(SIMHASH)}, NULL, '{NOW}'), "
            f"(1001, NULL, 100, 'simhash64', {to_signed64(SIMHASH ^ 0b101)}, NULL, '{NOW}'), "
            f"(1002, 10, NULL, 'dna', NULL, NULL, '{NOW}')"
        ),
        (
            "INSERT INTO simhash_index (fingerprint_id, table_no, prefix, fingerprint) VALUES "
            f"(1000, 0, 1, {to_signed64(SIMHASH)}), (1001, 0, 1, {to_signed64(SIMHASH ^ 0b101)})"
        ),
        (
            "INSERT INTO code_index (id, fingerprint_id, kind, code, position) VALUES "
            "(1, 1002, 'dna', 77, 0), (2, 1002, 'dna', -5, 1), (3, 1002, 'dna', 77, 2)"
        ),
        (
            "INSERT INTO matches (id, page_id, work_id, chapter_id, score, methods, spans, status, "
            "first_seen, "
            "last_seen) VALUES (7, 100, 1, 10, 0.9, '[\"simhash\"]', '[[0, 4, 6, 10]]', 'confirmed', "
            f"'{NOW}', '{NOW}')"
        ),
    ]
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))
        # explicit ids: move the sequences past them, as real use would
        if engine.dialect.name == "postgresql":
            for table in ("works", "chapters", "pages", "fingerprints", "code_index", "matches"):
                connection.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM "
                        f"{table}))"
                    )
                )


def test_skeleton_database_upgrades_without_data_loss(empty_settings: Settings) -> None:
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)
        assert migrate(empty_settings, engine) not in ("", "0001")

        with Session(engine) as session:
            assert session.scalar(select(Match.status).where(Match.id == 7)) == "confirmed"
            assert session.scalar(select(Match.spans).where(Match.id == 7)) == [[0, 4, 6, 10]]
            pages = {p.id: p for p in session.scalars(select(Page))}
            assert {p.encoding for p in pages.values()} == {"gbk", "utf-8", ""}
            sites = {s.host: s.id for s in session.scalars(select(Site))}
            assert set(sites) == {"pirate.test", "other.test"}
            assert pages[100].site_id == pages[101].site_id == sites["pirate.test"]
            assert pages[100].fingerprinted_at is not None and pages[101].fingerprinted_at is None
            assert session.scalar(select(Fingerprint.value).where(Fingerprint.id == 1000)) == to_signed64(
                SIMHASH
            )

            # the Simhash index now answers from fingerprints.value
            hits = simhash_candidates(session, SIMHASH, DEFAULT_LAYOUT, owner="page")
            assert [(h.owner_id, h.distance) for h in hits] == [(100, 2)]
            assert [
                h.owner_id for h in simhash_candidates(session, SIMHASH, DEFAULT_LAYOUT, owner="chapter")
            ] == [10]

            # code index rows kept in their new shape
            rows = session.execute(
                select(CodeIndexRow.position, CodeIndexRow.code).order_by(CodeIndexRow.position)
            )
            assert [tuple(r) for r in rows] == [(0, 77), (1, -5), (2, 77)]
            assert code_holders(session, "dna", [77, -5, 3], owner="chapter") == {77: {10}, -5: {10}}
            owners = session.execute(select(CodeIndexRow.owner, CodeIndexRow.owner_id)).all()
            assert {tuple(o) for o in owners} == {(CODE_OWNER_CHAPTER, 10)}  # 0004 fills in the owner
            # 0001 kept no payload here
            assert load_codes(session, owner="chapter", owner_id=10, kind="dna") == []
            assert set(count_orphans(session).values()) == {0}

            # and new rows get fresh ids after the old ones
            session.add(Page(url="http://new.test/", final_url="http://new.test/", status=200))
            session.flush()
            assert session.scalar(select(Page.id).where(Page.url == "http://new.test/")) > 102
            session.rollback()

        # upgrading again is a no-op
        assert migrate(empty_settings, engine) == migrate(empty_settings, engine)
    finally:
        engine.dispose()


def test_pipeline_migration_keeps_crawl_links_and_progress(empty_settings: Settings) -> None:
    """0004 rebuilds ``crawl_jobs`` on SQLite (a new CHECK): pages keep their crawl job; what was
    fingerprinted counts as compared; a work with fingerprints counts as indexed (until 0013 marks every work
    for indexing again); the new status is accepted."""
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0001") == "0001"
        _skeleton_data(engine)
        assert migrate(empty_settings, engine, revision="0003") == "0003"
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO crawl_jobs (id, start_urls, depth, max_pages, status, started_at, "
                    f"pages_seen, pages_failed, error) VALUES (5, '[]', 1, 10, 'finished', '{NOW}', 3, 0, '')"
                )
            )
            connection.execute(text("UPDATE pages SET crawl_job_id = 5"))
        assert migrate(empty_settings, engine, revision="0004") == "0004"
        with engine.connect() as connection:
            assert connection.execute(text("SELECT indexed_at FROM works WHERE id = 1")).scalar() is not None
        assert migrate(empty_settings, engine) not in ("", "0003", "0004")
        with Session(engine) as session:
            pages = {p.id: p for p in session.scalars(select(Page))}
            assert {p.crawl_job_id for p in pages.values()} == {5}
            assert pages[100].compared_at is not None and pages[101].compared_at is None
            # 0013: every work is indexed again under the fingerprint contract (the sweep does it)
            assert session.scalar(select(Work.indexed_at).where(Work.id == 1)) is None
            job = session.get(CrawlJob, 5)
            assert job is not None and (job.pages_seen, job.copies_found) == (3, 0)
            job.status = "interrupted"
            session.commit()
    finally:
        engine.dispose()


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_accounts_migration_matches_the_models_and_downgrades(empty_settings: Settings) -> None:
    """Revision 0005 adds ``users`` (role checked by the database) and ``login_failures``, exactly as the
    models declare them, and goes away cleanly on downgrade; the schema at head is the models' schema."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect
    from sqlalchemy.exc import IntegrityError

    from fptrack.storage.db import alembic_config
    from fptrack.storage.models import Base, User

    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0004") == "0004"
        assert not inspect(engine).has_table("users")
        migrate(empty_settings, engine)
        with engine.connect() as connection:
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        # revision 0002 added pages.site_id / crawl_job_id by plain ADD COLUMN, which cannot declare a foreign
        # key on SQLite; and the GIN index over page samples exists on PostgreSQL only (the model declares it
        # for that dialect, which the comparison does not look at): the only known differences
        sqlite = engine.dialect.name == "sqlite"
        known = [
            d
            for d in differences
            if sqlite
            and (
                (d[0] in ("add_fk", "remove_fk") and d[1].table.name == "pages")
                or (d[0] == "add_index" and d[1].name == "ix_page_codes_sample")
            )
        ]
        assert [d for d in differences if d not in known] == []

        with Session(engine) as session:
            session.add(User(username="ada", password_hash="scrypt:x", role="admin", active=True))
            session.commit()
            session.add(User(username="root", password_hash="scrypt:x", role="root", active=True))
            with pytest.raises(IntegrityError):
                session.commit()
            session.rollback()
            session.add(User(username="ada", password_hash="scrypt:y", role="viewer", active=True))
            with pytest.raises(IntegrityError):
                session.commit()

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0004")
        assert not inspect(engine).has_table("users") and not inspect(engine).has_table("login_failures")
        migrate(empty_settings, engine)
        assert inspect(engine).has_table("users")
    finally:
        engine.dispose()


def test_a_new_sqlite_database_migrates_without_warnings(tmp_path: Path) -> None:
    """`fptrack init` on a new SQLite file printed four SAWarnings (batch mode reflecting the expression
    indexes of `fingerprints`): a new user's first command should be quiet."""
    import warnings

    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'new.db'}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        migrate(settings)
