"""A match on a downloaded archive names the archive's file its passages are in (fingerprint.containers
members_at): in the notice item, its text and HTML (EN and ZH), kept by a follow-up, in ``fptrack matches``
(JSON ``files``, the table) and on the admin's match page; a match on a page names none. SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from flask import Flask
from sqlalchemy.orm import Session

from fptrack.admin.web import create_app
from fptrack.cli.main import main
from fptrack.core.settings import Settings
from fptrack.jobs.notice_render import render_html
from fptrack.storage.models import Match, Page
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import Seeded, seed
from tests.unit.jobs.test_notices import _draft, _sender

MEMBER = "第一卷/003.txt"
OTHER = "第一卷/001.txt"
NOW = datetime(2026, 11, 29, tzinfo=UTC)


@pytest.fixture
def seeded(session: Session) -> Seeded:
    """The seed's Chinese copy, confirmed, made a page of a downloaded zip: its text the second of two
    members (the spans moved with it), its note a download's."""
    ids = seed(session)
    match = session.get(Match, ids.hostile_match_id)
    assert match is not None
    page = session.get(Page, match.page_id)
    assert page is not None
    prefix = f"=== file: {OTHER} ===\n序言\n=== file: {MEMBER} ===\n"
    page.text = prefix + page.text
    page.note = "download: zip, 2 text(s) read (text)"
    match.spans = [[s[0] + len(prefix), s[1] + len(prefix), *s[2:]] for s in match.spans or []]
    match.evidence_version_id = None
    match.status = "confirmed"
    session.commit()
    return ids


@pytest.mark.parametrize(
    ("language", "line"),
    [("zh", f"压缩包内文件：{MEMBER}"), ("en", f"In the downloaded archive, the file(s): {MEMBER}")],
)
def test_the_notice_names_the_file_in_the_archive(
    session: Session, settings: Settings, seeded: Seeded, language: str, line: str
) -> None:
    _sender(session, language=language)
    notice = _draft(session, settings, language=language)
    (item,) = [item for item in notice.items if item.match_id == seeded.hostile_match_id]
    assert item.file_members == MEMBER
    assert line in notice.text
    assert f'<dd class="file-members">{MEMBER}</dd>' in render_html(notice, NOW)
    others = [item for item in notice.items if item.match_id != seeded.hostile_match_id]
    assert all(item.file_members == "" for item in others)


def test_the_cli_and_the_admin_name_the_file(session: Session, settings: Settings, seeded: Seeded) -> None:
    env = {"FPTRACK_DATABASE_URL": settings.database_url, "FPTRACK_DATA_DIR": str(settings.data_dir)}
    result = CliRunner().invoke(main, ["matches", "--status", "all", "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    records = {record["id"]: record for record in map(json.loads, result.output.splitlines())}
    assert records[seeded.hostile_match_id]["files"] == [MEMBER]
    assert all("files" not in r for i, r in records.items() if i != seeded.hostile_match_id)
    table = (
        CliRunner()
        .invoke(main, ["matches", "--status", "all", "--id", str(seeded.hostile_match_id)], env=env)
        .output
    )
    assert f"match {seeded.hostile_match_id}: in the downloaded archive, the file(s) {MEMBER}" in table

    app: Flask = create_app(settings)
    try:
        add_account(settings, "rita", "reviewer")
        client = app.test_client()
        log_in(client, "rita")
        html = client.get(f"/matches/{seeded.hostile_match_id}").get_data(as_text=True)
        assert f'<dd class="archive-files">{MEMBER}</dd>' in html
        plain = client.get(f"/matches/{seeded.plain_match_id}").get_data(as_text=True)
        assert "archive-files" not in plain
    finally:
        app.extensions["fptrack"].engine.dispose()
