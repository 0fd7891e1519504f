"""``page_codes`` split into ranges of page ids (``fptrack db partition``, :mod:`storage.partitions`) on a
database written by the product: no row lost or misplaced, new pages in the range their id says, a work
registered afterwards finds copies in several ranges exactly as before, retention, deletion and the upkeep
work across ranges, running it again changes nothing, and the models still describe the schema."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select, text, update
from sqlalchemy.orm import Session

from fptrack.cli.common import CliContext
from fptrack.cli.database import db
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.maintenance import run_maintenance
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.jobs.retroactive import index_and_recheck
from fptrack.storage.code_index import pages_sharing
from fptrack.storage.db import create_engine_for, migrate
from fptrack.storage.fingerprints import code_array, page_sample
from fptrack.storage.housekeeping import count_orphans, delete_pages, retire_page_fingerprints
from fptrack.storage.models import Match, Page, PageCodes, utcnow
from fptrack.storage.partitions import (
    PartitionError,
    ensure_partitions_ahead,
    is_partitioned,
    partition_names,
    partition_page_codes,
    partition_report,
)

pytestmark = pytest.mark.postgres

WIDTH = 50  # page ids per range: small, so that a few pages and a jump of the id sequence cross ranges
NEWS = (DEMO_DATA / "library_news.txt").read_text("utf-8")


@pytest.fixture
def engine(postgres_settings: Settings) -> Iterator[Engine]:
    engine = create_engine_for(postgres_settings)
    yield engine
    engine.dispose()


def _page(session: Session, url: str, body: str) -> int:
    page = Page(url=url, final_url=url, host="127.0.0.1", status=200, title="t", text=body)
    session.add(page)
    session.flush()
    return page.id


def _crawl(session: Session, settings: Settings, pages: dict[str, str]) -> list[int]:
    """Store and fingerprint pages as a crawl does (the product's compare path), committed."""
    ids = [_page(session, url, body) for url, body in pages.items()]
    service.process_pages(session, ids, settings)
    session.commit()
    return ids


def _next_page_id_after(session: Session, page_id: int) -> None:
    """The id sequence jumps, as a long crawl elsewhere would move it."""
    session.execute(text("SELECT setval(pg_get_serial_sequence('pages', 'id'), :v)"), {"v": page_id})
    session.commit()


def _where_rows_are(session: Session) -> dict[int, str]:
    """page id -> the partition (or table) holding its ``page_codes`` row."""
    rows = session.execute(text("SELECT page_id, tableoid::regclass::text FROM page_codes"))
    return {int(page_id): str(table) for page_id, table in rows}


def _work_sample(settings: Settings) -> list[int]:
    """The sample a newly registered lighthouse.txt looks up (what compare.service.index_work reads)."""
    codes: list[int] = []
    for chapter in demo_chapters("lighthouse.txt"):
        for pairs in service.chapter_document(chapter).index_codes().values():
            codes += page_sample(code_array(pairs), 64).tolist()
    return sorted(set(codes))


def test_partitioning_keeps_every_row_and_every_answer(engine: Engine, postgres_settings: Settings) -> None:
    settings = postgres_settings
    chapter = demo_chapters("lighthouse.txt")[1]
    excerpt = chapter[len(chapter) // 3 :][:300]
    with Session(engine) as session:
        copy, quoted, unrelated = _crawl(
            session,
            settings,
            {
                "http://127.0.0.1/copy.html": "首页 > 小说\n" + chapter + "\n下一章",
                "http://127.0.0.1/quote.html": NEWS[:800] + excerpt + NEWS[800:1600],
                "http://127.0.0.1/news.html": NEWS,
            },
        )
        sample = _work_sample(settings)
        before = {page: held.tolist() for page, held in pages_sharing(session, sample).items()}
        rows_before = _where_rows_are(session)
    assert set(before) == {copy, quoted} and set(rows_before.values()) == {"page_codes"}

    plan = partition_page_codes(engine, pages_per_partition=WIDTH, ahead=2)
    assert plan.converts and plan.max_page_id == unrelated
    assert [r[0] for r in plan.ranges] == ["page_codes_p0", "page_codes_p50", "page_codes_p100"]
    with engine.connect() as connection:
        assert is_partitioned(connection)
    report = partition_report(engine)
    assert [(p.name, p.lower, p.upper, p.default) for p in report] == [
        ("page_codes_p0", None, 50, False),
        ("page_codes_p50", 50, 100, False),
        ("page_codes_p100", 100, 150, False),
        ("page_codes_default", None, None, True),
    ]
    with Session(engine) as session:
        # nothing copied, nothing lost: the old table is the first range, its indexes the parent's partitions
        assert _where_rows_are(session) == {page: "page_codes_p0" for page in rows_before}
        indexes = session.execute(
            text(
                "SELECT c.relname, p.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent "
                "WHERE c.relname LIKE '%page_codes_p0%' AND c.relkind = 'i'"
            )
        ).all()
        assert set(map(tuple, indexes)) == {
            ("pk_page_codes_p0", "pk_page_codes"),
            ("ix_page_codes_p0_sample", "ix_page_codes_sample"),
        }
        assert session.execute(
            text("SELECT reloptions FROM pg_class WHERE relname = 'ix_page_codes_sample'")
        ).scalar() == ["fastupdate=off"]

        # a page crawled once ids pass the first range goes to the next one
        _next_page_id_after(session, 60)
        (second_copy,) = _crawl(session, settings, {"http://127.0.0.1/copy2.html": chapter + "\n完"})
        assert 50 <= second_copy < 100
        assert _where_rows_are(session)[second_copy] == "page_codes_p50"

        # the look-up answers as before, now from two ranges' GIN indexes
        after = {page: held.tolist() for page, held in pages_sharing(session, sample).items()}
        assert {page: after[page] for page in before} == before
        assert set(after) == {copy, quoted, second_copy}

        work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
        assert index_and_recheck(session, work.work_id, settings) == 3
        session.commit()
        assert set(session.scalars(select(Match.page_id))) == {copy, quoted, second_copy}

        # ids past every range land in the default partition; the upkeep gives them a range of their own
        _next_page_id_after(session, 400)
        (far,) = _crawl(session, settings, {"http://127.0.0.1/far.html": NEWS[:2000] + excerpt})
        assert _where_rows_are(session)[far] == "page_codes_default"
    with Session(engine) as session:
        report_of_upkeep = run_maintenance(session, settings)
        session.commit()
    assert report_of_upkeep.partitions_added == tuple(
        f"page_codes_p{lower}" for lower in range(150, 550, WIDTH)
    )  # through far's range (400..449) and two empty ranges beyond it
    with Session(engine) as session:
        assert _where_rows_are(session)[far] == "page_codes_p400"
        assert session.scalar(text("SELECT count(*) FROM page_codes_default")) == 0

        # retention across ranges: the pages nobody fetched for a year lose their rows, the others keep them
        old = utcnow() - timedelta(days=400)
        session.execute(update(Page).where(Page.id.in_([copy, second_copy])).values(fetched_at=old))
        retired = retire_page_fingerprints(
            session, gone_before=None, unseen_before=utcnow() - timedelta(days=365)
        )
        assert retired == 2
        # deleting a page deletes its row wherever it is (the foreign key's cascade, cloned on each range)
        assert delete_pages(session, [far, quoted]) == 2
        session.commit()
        assert _where_rows_are(session) == {unrelated: "page_codes_p0"}
        assert set(count_orphans(session).values()) == {0}
        assert session.scalar(select(func.count()).select_from(PageCodes)) == 1

    # a second run changes nothing
    names = [p.name for p in partition_report(engine)]
    again = partition_page_codes(engine, pages_per_partition=WIDTH, ahead=2)
    assert not again.converts and again.ranges == () and again.statements == ()
    assert ensure_partitions_ahead(engine).ranges == ()
    assert [p.name for p in partition_report(engine)] == names


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_the_models_still_describe_a_partitioned_schema(engine: Engine, postgres_settings: Settings) -> None:
    """Alembic's comparison of models and schema finds nothing but the partitions (tables the models do not
    declare, by design), and the migrations run again at head on a partitioned database."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from fptrack.storage.models import Base

    partition_page_codes(engine, pages_per_partition=WIDTH, ahead=1)
    head = migrate(postgres_settings, engine)
    assert migrate(postgres_settings, engine) == head
    with engine.connect() as connection:
        partitions = partition_names(connection)
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert partitions == {"page_codes_p0", "page_codes_p50", "page_codes_default"}
    removed = {d[1].name for d in differences if d[0] == "remove_table"}
    assert removed == partitions
    # and their indexes, named after them
    of_partitions = {(d[0], d[1].name) for d in differences if d[0] == "remove_index"}
    assert of_partitions == {("remove_index", f"ix_{name}_sample") for name in partitions}
    assert [d for d in differences if d[0] not in ("remove_table", "remove_index")] == []


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_sqlite_is_refused_in_one_line(sqlite_settings: Settings) -> None:
    engine = create_engine_for(sqlite_settings)
    try:
        with pytest.raises(PartitionError, match="needs PostgreSQL"):
            partition_page_codes(engine, pages_per_partition=WIDTH)
        assert ensure_partitions_ahead(engine).ranges == ()  # the upkeep has nothing to do there
    finally:
        engine.dispose()


def test_dry_run_prints_the_plan_and_changes_nothing(engine: Engine, postgres_settings: Settings) -> None:
    runner = CliRunner()
    context = CliContext(postgres_settings)
    result = runner.invoke(db, ["partition", "--pages-per-partition", "50", "--dry-run"], obj=context)
    assert result.exit_code == 0, result.output
    assert "would turn it into ranges of 50 ids" in result.output
    assert "page_codes_p0: page ids the lowest id to 49" in result.output
    assert "ALTER TABLE page_codes ATTACH PARTITION page_codes_p0 FOR VALUES FROM (MINVALUE) TO (50);" in (
        result.output
    )
    with engine.connect() as connection:
        assert not is_partitioned(connection)

    result = runner.invoke(db, ["partition", "--pages-per-partition", "50", "--ahead", "1"], obj=context)
    assert result.exit_code == 0, result.output
    assert "page_codes_default" in result.output and "page_codes_p50" in result.output
    with engine.connect() as connection:
        assert is_partitioned(connection)
