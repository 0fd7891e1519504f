"""A copy that keeps the meaning, not the words (issue 36), in the admin, on SQLite and PostgreSQL: the match
page shows its kind as a badge (翻译（英文）/ Translation (English)), its coverage (覆盖原章节 84%) and the
page's sentences beside the chapter's, in order, with their similarity, escaped, nothing of the exact
passages' highlighting; the match list shows the kind; the API gives kind, alignment and the aligned pairs'
texts; an exact copy's page is as it was."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lxml import html as lxml_html
from sqlalchemy.orm import Session

from fptrack.admin.i18n import LANGUAGE_COOKIE
from fptrack.core.settings import Settings
from fptrack.services.accounts.tokens import create_token
from fptrack.storage.db import create_engine_for, session_factory, session_scope
from tests.support.accounts import add_account, log_in
from tests.support.admin_seed import ESCAPED_SCRIPT, SCRIPT, Seeded
from tests.support.meaning_seed import CHAPTER_SENTENCES, PAGE_SENTENCES, add_meaning_match
from tests.unit.admin.test_web_i18n import _untranslated


@pytest.fixture
def client(app: Flask, settings: Settings) -> FlaskClient:
    add_account(settings, "rita", "reviewer")
    client = app.test_client()
    log_in(client, "rita")
    return client


def _pairs(page: str) -> list[tuple[str, str, str, str]]:
    """(number, page sentence, chapter sentence, similarity) of each aligned pair shown, in order."""
    tree = lxml_html.fromstring(page)
    return [
        (
            item.findtext(".//span[@class='pair-number']"),
            item.find(".//div[@class='text page-sentence']").text_content(),
            item.find(".//div[@class='text chapter-sentence']").text_content(),
            " ".join(item.find(".//span[@class='pair-similarity']").itertext()).split()[-1],
        )
        for item in tree.iterfind(".//li[@class='aligned-pair']")
    ]


def test_a_translation_is_shown_pair_by_pair_in_chinese(
    client: FlaskClient, session: Session, seeded: Seeded
) -> None:
    match_id = add_meaning_match(session, seeded)
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    response = client.get(f"/matches/{match_id}")
    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert '<span class="kind kind-translation">翻译（英文）</span>' in page
    assert "覆盖原章节 84%" in page
    assert "2 对句子 （网页共 3 句，原章节共 2 句）" in page
    assert _pairs(page) == [
        ("1", PAGE_SENTENCES[0], CHAPTER_SENTENCES[0], "0.91"),
        ("2", PAGE_SENTENCES[1], CHAPTER_SENTENCES[1], "0.87"),
    ]
    assert SCRIPT not in page and ESCAPED_SCRIPT in page  # the crawled sentence stays text
    assert "<mark" not in page and 'class="compact spans"' not in page  # no exact passages
    assert _untranslated(page) == []


def test_a_rewrite_in_english_and_the_list_shows_the_kind(
    client: FlaskClient, session: Session, seeded: Seeded
) -> None:
    match_id = add_meaning_match(session, seeded, kind="rewrite", status="flagged")
    page = client.get(f"/matches/{match_id}").get_data(as_text=True)
    assert '<span class="kind kind-rewrite">Rewrite</span>' in page
    assert "84% of the original chapter covered" in page and "the same meaning in other words" in page
    assert [pair[0] for pair in _pairs(page)] == ["1", "2"]
    listing = client.get("/matches").get_data(as_text=True)
    row = re.search(rf'<tr id="match-{match_id}">.*?</tr>', listing, re.DOTALL)
    assert row is not None and "meaning" in row.group(0) and ">Rewrite</span>" in row.group(0)
    client.set_cookie(LANGUAGE_COOKIE, "zh")
    assert ">洗稿改写</span>" in client.get("/matches").get_data(as_text=True)


def test_an_exact_copys_page_shows_no_kind_and_keeps_its_passages(
    client: FlaskClient, seeded: Seeded
) -> None:
    page = client.get(f"/matches/{seeded.hostile_match_id}").get_data(as_text=True)
    assert 'class="kind' not in page and "aligned-pair" not in page
    assert 'class="compact spans"' in page and "<mark" in page


def test_a_pair_that_no_longer_fits_the_texts_is_left_out(
    client: FlaskClient, session: Session, seeded: Seeded
) -> None:
    from fptrack.storage.models import Match

    match_id = add_meaning_match(session, seeded)
    match = session.get(Match, match_id)
    assert match is not None and match.alignment is not None
    match.alignment = {**match.alignment, "pairs": [[0, 10_000, 0, 5, 0.9]]}  # past the page's end
    session.commit()
    page = client.get(f"/matches/{match_id}").get_data(as_text=True)
    assert _pairs(page) == [] and "No aligned sentence fits the texts as stored" in page


def test_the_api_gives_the_kind_the_alignment_and_the_pairs_texts(
    app: Flask, settings: Settings, session: Session, seeded: Seeded
) -> None:
    match_id = add_meaning_match(session, seeded)
    add_account(settings, "api", "viewer")
    engine = create_engine_for(settings)
    try:
        with session_scope(session_factory(engine)) as s:
            token = create_token(s, "api", "test").token
    finally:
        engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    detail = app.test_client().get(f"/api/matches/{match_id}", headers=headers).get_json()
    assert detail["kind"] == "translation:en" and detail["alignment"]["coverage"] == 0.84
    assert [(pair["page_text"], pair["chapter_text"]) for pair in detail["aligned"]] == list(
        zip(PAGE_SENTENCES, CHAPTER_SENTENCES, strict=True)
    )
    exact = app.test_client().get(f"/api/matches/{seeded.hostile_match_id}", headers=headers).get_json()
    assert exact["kind"] is None and exact["alignment"] is None and exact["aligned"] is None
    listed = app.test_client().get("/api/matches?status=confirmed", headers=headers).get_json()
    assert {item["kind"] for item in listed["items"]} >= {"translation:en"}
