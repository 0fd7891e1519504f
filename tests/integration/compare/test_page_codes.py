"""The page side kept as one ``page_codes`` row a page, on SQLite and PostgreSQL: works registered after the
crawl find their copies through the sample, site templates are what the full codes decided, deleting a page
leaves nothing behind, and revision 0016 converts a database written by the earlier release."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest
from alembic import command
from sqlalchemy import func, inspect, select, text
from sqlalchemy.orm import Session

from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.compare import service
from fptrack.compare.templates import site_template, site_template_codes
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.jobs.retroactive import index_and_recheck
from fptrack.storage import code_index
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from fptrack.storage.fingerprints import load_page_codes, load_page_samples, page_code_row
from fptrack.storage.housekeeping import count_orphans, delete_pages
from fptrack.storage.models import CODE_OWNER_PAGE, CodeIndexRow, Fingerprint, Match, Page, PageCodes, Site

NEWS = (DEMO_DATA / "library_news.txt").read_text("utf-8")


def _page(session: Session, url: str, body: str, site_id: int | None = None) -> int:
    page = Page(url=url, final_url=url, host="127.0.0.1", status=200, title="t", text=body, site_id=site_id)
    session.add(page)
    session.flush()
    return page.id


def _count(session: Session, model: type, *where: object) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def test_a_work_registered_after_the_crawl_finds_its_copies_through_the_sample(
    session: Session, settings: Settings
) -> None:
    chapter = demo_chapters("lighthouse.txt")[1]
    start = len(chapter) // 3
    excerpt = chapter[start : start + 300]  # a short excerpt inside unrelated text
    copy = _page(session, "http://127.0.0.1/copy.html", "首页 > 小说\n" + chapter + "\n下一章")
    quoted = _page(session, "http://127.0.0.1/quote.html", NEWS[:800] + excerpt + NEWS[800:1600])
    unrelated = _page(session, "http://127.0.0.1/news.html", NEWS)
    service.process_pages(session, [copy, quoted, unrelated], settings)
    session.commit()
    assert _count(session, Match) == 0
    assert _count(session, CodeIndexRow, CodeIndexRow.owner == CODE_OWNER_PAGE) == 0
    assert _count(session, Fingerprint, Fingerprint.page_id.is_not(None)) == 0
    assert _count(session, PageCodes) == 3
    samples = load_page_samples(session, [copy])
    assert 0 < len(samples[copy]) < len(load_page_codes(session, [copy])[copy])

    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    assert index_and_recheck(session, work.work_id, settings) == 2
    session.commit()
    found = {(m.page_id, m.chapter.index) for m in session.scalars(select(Match))}
    assert found == {(copy, 2), (quoted, 2)}


def test_a_text_on_many_pages_is_read_and_compared_once(
    session: Session, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mirrors: one chapter served by four pages, three stored with the hash of their text and one without. A
    new work's look-up reads the sample of one page a text (a page without a hash is a text of its own) and
    answers every page; comparing them again compares the text once and records the copy on all four."""
    body = "首页 > 小说\n" + demo_chapters("lighthouse.txt")[1] + "\n下一章"
    mirrors = [_page(session, f"http://m{i}.test/book/2.html", body) for i in range(3)]
    alone = _page(session, "http://solo.test/book/2.html", body)
    unrelated = _page(session, "http://news.test/1.html", NEWS)
    for page_id in mirrors:
        session.get_one(Page, page_id).content_sha256 = hashlib.sha256(body.encode("utf-8")).hexdigest()
    service.process_pages(session, [*mirrors, alone, unrelated], settings)
    work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
    service.index_work(session, work.work_id, settings)

    sample = load_page_samples(session, [alone])[alone]
    read: list[int] = []

    def reading(session: Session, page_ids: Sequence[int]) -> dict[int, np.ndarray]:
        read.extend(page_ids)
        return load_page_samples(session, page_ids)

    monkeypatch.setattr(code_index, "load_page_samples", reading)
    shared = code_index.pages_sharing(session, sample.tolist())
    assert sorted(read) == sorted([min(mirrors), alone])
    assert sorted(shared) == sorted([*mirrors, alone])
    assert all(np.array_equal(codes, sample) for codes in shared.values())

    recomparison = service.Recomparison()
    service.recompare_pages(session, [*mirrors, alone, unrelated], settings, recomparison=recomparison)
    assert (recomparison.compared, recomparison.reused) == (2, 3)  # the chapter's text once, the news once
    spans = {m.page_id: (m.chapter.index, m.spans) for m in session.scalars(select(Match))}
    assert sorted(spans) == sorted([*mirrors, alone])
    assert len({str(found) for found in spans.values()}) == 1
    session.commit()


def test_site_templates_are_decided_on_the_full_winnowing_codes(session: Session, settings: Settings) -> None:
    site = Site(host="mirror.test")
    session.add(site)
    session.flush()
    header = "本站域名镜像网小说频道欢迎收藏本站每日更新"
    footer = "免责声明本站所有小说均来自网友上传与本站无关"
    rng = np.random.default_rng(5)
    bodies = {
        f"http://mirror.test/{i}.html": header
        + "".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3000, 500))
        + footer
        for i in range(8)
    }
    ids = [_page(session, url, body, site.id) for url, body in bodies.items()]
    service.process_pages(session, ids, settings)
    expected = site_template_codes(
        {
            url: np.array([code for code, _ in fingerprint_text(body).winnow_chars], dtype=np.int64)
            for url, body in bodies.items()
        }
    )
    assert expected and site_template(session, site.id) == frozenset(expected)

    assert delete_pages(session, ids[:3]) == 3
    session.commit()
    assert _count(session, PageCodes) == 5
    assert set(count_orphans(session).values()) == {0}


def test_revision_0016_converts_page_fingerprints_and_keeps_matches(settings: Settings) -> None:
    """A database of the earlier release (at 0015, page payloads and page code index rows): after the upgrade
    the match stands, the page side is one ``page_codes`` row a page equal to what the writer writes now, and
    a work registered afterwards finds the page; the downgrade leaves the page and the works to be
    fingerprinted again by the earlier release."""
    from fptrack.storage.compressed import compress_text

    settings = Settings(data_dir=settings.data_dir, database_url=_scratch_url(settings))
    engine = create_engine_for(settings)
    try:
        migrate(settings, engine, revision="0015")
        chapter = demo_chapters("lighthouse.txt")[1]
        body = "首页\n" + chapter + "\n下一章"
        document = fingerprint_text(body)
        now = "2026-01-02 03:04:05+00:00"
        with engine.begin() as connection:
            run = connection.execute
            run(
                text(
                    "INSERT INTO works (id, title, source_name, encoding, content_sha256, text, created_at) "
                    f"VALUES (1, 'w', 'w.txt', 'utf-8', 'sha', 'x', '{now}')"
                )
            )
            run(
                text(
                    'INSERT INTO chapters (id, work_id, "index", title, start, "end", text_z) '
                    "VALUES (10, 1, 1, 'c', 0, 1, :z)"
                ),
                {"z": compress_text("x")},
            )
            run(
                text(
                    "INSERT INTO pages (id, url, final_url, host, status, encoding, title, text_z, "
                    "content_sha256, snapshot_sha256, fetched_at, fingerprinted_at, compared_at) VALUES "
                    "(100, 'http://p.test/1', 'http://p.test/1', 'p.test', 200, 'utf-8', 't', :z, 's', 's', "
                    f"'{now}', '{now}', '{now}')"
                ),
                {"z": compress_text(body)},
            )
            run(
                text(
                    "INSERT INTO matches (id, page_id, work_id, chapter_id, score, methods, spans, status, "
                    f"first_seen, last_seen) VALUES (7, 100, 1, 10, 0.9, '[]', '[]', 'confirmed', '{now}', "
                    f"'{now}')"
                )
            )
            for number, (kind, pairs) in enumerate(document.index_codes().items()):
                array = np.array(pairs, dtype=np.int64).reshape(-1, 2)
                run(
                    text(
                        "INSERT INTO fingerprints (id, page_id, kind, payload, created_at) "
                        f"VALUES ({1000 + number}, 100, :kind, :payload, '{now}')"
                    ),
                    {"kind": kind, "payload": array.astype("<i8").tobytes()},
                )
                run(
                    text(
                        "INSERT INTO code_index (fingerprint_id, position, kind, code, owner, owner_id) "
                        f"VALUES ({1000 + number}, :p, :kind, :c, {CODE_OWNER_PAGE}, 100)"
                    ),
                    [{"p": p, "kind": kind, "c": c} for c, p in array.tolist()],
                )
            if engine.dialect.name == "postgresql":  # explicit ids: move the sequences past them
                for table in ("works", "chapters", "pages", "matches", "fingerprints"):
                    run(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 10000)"))
        migrate(settings, engine)
        with Session(engine) as session:
            assert session.scalar(select(Match.status).where(Match.id == 7)) == "confirmed"
            assert _count(session, CodeIndexRow) == 0
            assert _count(session, Fingerprint) == 0
            row = session.get(PageCodes, 100)
            assert row is not None
            arrays = {kind: np.array(pairs, dtype=np.int64) for kind, pairs in document.index_codes().items()}
            written = page_code_row(100, arrays, settings.page_sample_window, postgres=False)
            assert row.winnow == written["winnow"]
            assert load_page_samples(session, [100])[100].tobytes() == written["sample"]
            work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
            assert 100 in service.index_work(session, work.work_id, settings)
            assert set(count_orphans(session).values()) == {0}
            session.commit()
        # back to 0015: nothing fingerprinted by today's code; the page and the works are handed to the
        # earlier release's sweep, the match stays
        config = alembic_config(settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0015")
        with engine.connect() as connection:
            run = connection.execute
            assert run(text("SELECT fingerprinted_at, compared_at FROM pages WHERE id = 100")).one() == (
                None,
                None,
            )
            assert run(text("SELECT count(*) FROM works WHERE indexed_at IS NOT NULL")).scalar_one() == 0
            assert run(text("SELECT status FROM matches WHERE id = 7")).scalar_one() == "confirmed"
            assert run(text("SELECT count(*) FROM fingerprints WHERE page_id IS NOT NULL")).scalar_one() == 0
        assert not inspect(engine).has_table("page_codes")
    finally:
        engine.dispose()
        _drop_scratch(settings)


def _scratch_url(settings: Settings) -> str:
    """An empty database next to the test's own (a fresh SQLite file, or a new PostgreSQL database)."""
    import uuid

    from tests.conftest import _admin_engine, _pg_url

    if settings.database_url.startswith("sqlite"):
        return f"sqlite:///{settings.data_dir / 'at_0015.db'}"
    name = f"fptrack_test_a2_{uuid.uuid4().hex[:8]}"
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return _pg_url(name)


def _drop_scratch(settings: Settings) -> None:
    if settings.database_url.startswith("sqlite"):
        return
    from tests.conftest import _admin_engine

    name = settings.database_url.rsplit("/", 1)[-1]
    admin = _admin_engine()
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
