"""A copy drawn as images whose images a later fetch could not read (no OCR engine, an image failed) is no
removal: the page's short text tells nothing, as an unsettled rendering's does not."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings
from fptrack.storage.db import session_scope
from fptrack.storage.match_life import IMAGES_UNREAD_NOTE
from tests.integration.compare.test_copy_life import (  # noqa: F401 - fixtures
    CHAPTERS,
    COPY_URL,
    _checks,
    _crawl,
    _fetched,
    _match,
    life_settings,
    sessions,
)


def test_a_page_whose_chapter_images_were_not_read_is_no_removal(
    sessions: sessionmaker[Session],  # noqa: F811
    life_settings: Settings,  # noqa: F811
) -> None:
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    short = "第一章\n目录 下一章"
    for _ in range(2):
        note = f"images: 0 of 2 image(s) read by OCR ({IMAGES_UNREAD_NOTE} whole); image /1.png: HTTP 404"
        _crawl(sessions, life_settings, _fetched(COPY_URL, 200, short, note=note))
        _crawl(sessions, life_settings, _fetched(COPY_URL, 200, CHAPTERS[0]))
    with session_scope(sessions) as session:
        match = _match(session)
        assert [o for o, _, _ in _checks(session, match.id)] == ["present", "present"]
        assert match.down_seen_at is None and match.taken_down_at is None
    # the same short text with its images read (or none there) is a removal
    _crawl(sessions, life_settings, _fetched(COPY_URL, 200, short))
    with session_scope(sessions) as session:
        assert [o for o, _, _ in _checks(session, _match(session).id)][-1] == "removed"
