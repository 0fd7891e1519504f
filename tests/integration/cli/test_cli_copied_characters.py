"""One number for "how much was copied": ``fptrack check`` and the admin's match page count the copied
characters with the same function (``compare.records.copied_characters``), so a person who checks a page and
then opens its match reads the same figure (issue 37: 10318 against 12735)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.cli.demo import DEMO_DATA, demo_chapters
from fptrack.cli.main import main
from fptrack.compare import service
from fptrack.compare.records import copied_characters
from fptrack.compare.works import register_work_file
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.models import Match, Page
from tests.support.accounts import add_account, log_in


def test_overlapping_passages_count_once() -> None:
    assert copied_characters([]) == 0
    assert copied_characters([[10, 20, 0, 10], [0, 5, 50, 55]]) == 15
    assert copied_characters([[0, 10, 0, 10], [5, 15, 5, 15], [12, 14, 0, 2]]) == 15
    assert copied_characters([[8, 8, 0, 0], [9, 3, 0, 0]]) == 0  # empty and reversed spans cover nothing


def test_check_and_the_admin_match_page_show_the_same_copied_characters(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    # a copy re-punctuated and re-spaced, with an advertisement spliced in: the normalised count the
    # compare decides on and the page characters the passages cover differ here
    chapter = demo_chapters("lighthouse.txt")[1]
    middle = len(chapter) // 2
    copied = (
        chapter[:middle].replace("，", ", ").replace("。", ". ")
        + "\n【广告】最新章节请访问本站，手机阅读更方便，记住我们的网址。\n"
        + chapter[middle:]
    )
    suspect = tmp_path / "suspect.txt"
    suspect.write_text(copied, "utf-8")

    engine = create_engine_for(sqlite_settings)
    try:
        with Session(engine) as session:
            work = register_work_file(session, DEMO_DATA / "lighthouse.txt")
            service.index_work(session, work.work_id, sqlite_settings)
            url = "http://pirate.example/2.html"
            page = Page(url=url, final_url=url, host="pirate.example", status=200, text=copied)
            session.add(page)
            session.flush()
            service.process_pages(session, [page.id], sqlite_settings)
            session.commit()
            match = session.scalars(select(Match).where(Match.page_id == page.id)).one()
            stored = copied_characters(match.spans)
    finally:
        engine.dispose()

    env = {"FPTRACK_DATABASE_URL": sqlite_settings.database_url}
    checked = CliRunner().invoke(main, ["check", str(suspect)], env=env)
    assert checked.exit_code == 3, checked.output
    said_by_check = re.findall(r"\((\d+) characters;", checked.output)

    app = create_app(sqlite_settings)
    try:
        add_account(sqlite_settings, "rita", "reviewer")
        client = app.test_client()
        log_in(client, "rita")
        page_html = client.get(f"/matches/{match.id}").get_data(as_text=True)
    finally:
        app.extensions["fptrack"].engine.dispose()
    said_by_admin = re.findall(r"(\d+) characters of the page", page_html)

    assert stored > 0 and said_by_check == said_by_admin == [str(stored)]
