"""Revision 0015 compresses the texts of pages, page versions and chapters (storage.compressed): a database
made at revision 0014 upgrades with every character and every match, review, note and takedown record kept,
over more rows than one conversion batch, on both backends; the downgrade gives the plain texts back."""

from __future__ import annotations

from typing import Any

from alembic import command
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.storage.db import alembic_config, create_engine_for, migrate
from fptrack.storage.models import Chapter, Page, PageVersion
from tests.integration.storage.test_migrations import empty_settings  # noqa: F401  (the fixture)

NOW = "2026-01-02 03:04:05+00:00"
NOVEL = "第一回 灵根育孕源流出 心性修持大道生。诗曰：混沌未分天地乱，茫茫渺渺无人见。𠀀" * 80
NOTICE = "本章节已删除 (removed) 𪚥"
MANY = 1_203  # pages: more than two conversion batches
KEPT = ("matches", "review_decisions", "takedown_checks", "match_notes", "works", "match_rollups")


def _page_texts() -> dict[int, str]:
    texts = {100: NOVEL, 101: NOTICE, 102: "", 103: "  spaces  \n\t", 104: "Latin <b>only</b>"}
    texts.update({1000 + n: f"第{n}页 {NOVEL[: n % 300]}" for n in range(MANY)})
    return texts


CHAPTERS = {10: NOVEL, 11: "短", 12: ""}


def _fill_at_0014(engine: Engine) -> None:
    pages = _page_texts()
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO works (id, title, source_name, encoding, content_sha256, text, created_at) "
                f"VALUES (1, '西游记', 'x.txt', 'utf-8', 'sha-w', :text, '{NOW}')"
            ),
            {"text": NOVEL},
        )
        connection.execute(
            text(
                'INSERT INTO chapters (id, work_id, "index", title, start, "end", text) '
                "VALUES (:id, 1, :id, 'c', 0, :end, :text)"
            ),
            [{"id": cid, "end": len(body), "text": body} for cid, body in CHAPTERS.items()],
        )
        connection.execute(
            text(
                "INSERT INTO pages (id, url, final_url, host, status, encoding, title, text, content_sha256, "
                f"snapshot_sha256, fetched_at) VALUES (:id, :url, :url, 'p.test', 200, 'utf-8', 't', :text, "
                f"'sha', 'snap', '{NOW}')"
            ),
            [{"id": pid, "url": f"http://p.test/{pid}", "text": body} for pid, body in pages.items()],
        )
        connection.execute(
            text(
                "INSERT INTO page_versions (id, page_id, status, final_url, title, text, content_sha256, "
                "snapshot_sha256, encoding, fetched_at, replaced_at) VALUES "
                f"(50, 101, 200, 'http://p.test/101', 't', :text, 'sha-old', 'snap-old', 'utf-8', '{NOW}', "
                f"'{NOW}'), (51, 100, 404, '', '', '', 'e', '', '', '{NOW}', '{NOW}')"
            ),
            {"text": NOVEL},
        )
        connection.execute(
            text(
                "INSERT INTO matches (id, page_id, work_id, chapter_id, score, methods, spans, status, "
                "first_seen, last_seen, recheck_state, taken_down_at, evidence_version_id) VALUES "
                f"(7, 100, 1, 10, 0.9, '[\"winnowing\"]', '[[0, 30, 0, 30]]', 'confirmed', '{NOW}', '{NOW}', "
                "NULL, NULL, NULL), "
                f"(8, 101, 1, 10, 0.8, '[\"simhash\"]', '[[0, 8, 2, 10]]', 'taken_down', '{NOW}', '{NOW}', "
                f"'removed', '{NOW}', 50)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO review_decisions (id, match_id, decision, reviewer, note, decided_at) VALUES "
                f"(1, 7, 'confirmed', 'ada', '确认', '{NOW}'), (2, 8, 'confirmed', 'ada', '', '{NOW}')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO takedown_checks (id, match_id, checked_at, outcome, http_status, detail, "
                f"source) VALUES (1, 8, '{NOW}', 'removed', 200, 'notice', 'recheck')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO match_notes (id, match_id, author, text, created_at) "
                f"VALUES (1, 7, 'ada', '已发函', '{NOW}')"
            )
        )


def _records(engine: Engine, columns: dict[str, list[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables that must survive, in the columns they had at 0014 (later revisions may add
    some)."""
    with engine.connect() as connection:
        return {
            table: sorted(
                (tuple(row) for row in connection.execute(text(f"SELECT {', '.join(names)} FROM {table}"))),
                key=repr,
            )
            for table, names in columns.items()
        }


def _plain_texts(engine: Engine) -> dict[str, dict[int, str]]:
    with engine.connect() as connection:
        return {
            table: dict(connection.execute(text(f"SELECT id, text FROM {table}")).all())  # type: ignore[arg-type]
            for table in ("pages", "page_versions", "chapters")
        }


def test_texts_compressed_with_every_record_kept_and_back(empty_settings: Settings) -> None:  # noqa: F811
    engine = create_engine_for(empty_settings)
    try:
        assert migrate(empty_settings, engine, revision="0014") == "0014"
        _fill_at_0014(engine)
        columns = {t: [f'"{c["name"]}"' for c in inspect(engine).get_columns(t)] for t in KEPT}
        records = _records(engine, columns)
        before = _plain_texts(engine)
        assert before["pages"] == _page_texts()

        assert migrate(empty_settings, engine, revision="0015") == "0015"
        assert migrate(empty_settings, engine) not in ("0014", "0015")
        assert _records(engine, columns) == records
        for table in ("pages", "page_versions", "chapters"):
            names = {c["name"] for c in inspect(engine).get_columns(table)}
            assert "text_z" in names and "text" not in names
        with Session(engine) as session:
            assert dict(session.execute(select(Page.id, Page.text)).all()) == before["pages"]  # type: ignore[arg-type]
            assert (
                dict(session.execute(select(PageVersion.id, PageVersion.text)).all())
                == before["page_versions"]
            )  # type: ignore[arg-type]
            assert dict(session.execute(select(Chapter.id, Chapter.text)).all()) == CHAPTERS  # type: ignore[arg-type]
            # the empty text is stored as no bytes at all
            assert session.scalar(text("SELECT length(text_z) FROM pages WHERE id = 102")) == 0
            # new rows after the upgrade
            session.add(Page(url="http://p.test/new", final_url="http://p.test/new", status=200, text=NOTICE))
            session.commit()
            assert session.scalar(select(Page.text).where(Page.url == "http://p.test/new")) == NOTICE
            session.execute(text("DELETE FROM pages WHERE url = 'http://p.test/new'"))
            session.commit()

        config = alembic_config(empty_settings)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0014")
        assert _plain_texts(engine) == before
        assert _records(engine, columns) == records
    finally:
        engine.dispose()
