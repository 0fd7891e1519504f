"""A notice's passages (原文 beside 侵权内容) quote the same stretch of text in both columns, on SQLite and
PostgreSQL: a sent notice once set 段落 4's 原文 "了，只是有破绽，嬴不得真好汉。”…" beside 侵权内容
"军教头王进的便是…". Long passages are cut to ``PASSAGE_LIMIT`` characters: cut at the same character count,
an indented original and an unindented copy with ads drifted apart."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.fingerprint.normalize import normalize
from fptrack.jobs.notices import PASSAGE_LIMIT
from fptrack.storage.models import Match, Page, Work
from tests.support.admin_seed import Seeded, seed
from tests.unit.jobs.test_notices import _draft, _sender


@pytest.fixture
def seeded(session: Session) -> Seeded:
    ids = seed(session)
    match = session.get(Match, ids.hostile_match_id)
    assert match is not None
    match.status = "confirmed"  # the Chinese copy on pirate.example, confirmed by a reviewer
    session.commit()
    return ids


LINES = [f"第{i}段，老人叹了口气，说道：“也罢，明日再修灯塔。”" for i in range(40)]


def test_both_columns_of_a_long_passage_quote_the_same_text(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    match = session.get(Match, seeded.hostile_match_id)
    assert match is not None
    work, page = session.get(Work, match.work_id), session.get(Page, match.page_id)
    assert work is not None and page is not None
    original = "\n".join("\u3000\u3000" + line for line in LINES)  # the registered text, indented
    copy = "".join(line + ("（本站广告）" if i % 5 == 2 else "") for i, line in enumerate(LINES))
    work_start, page_start = len(work.text) + 1, len(page.text) + 1
    work.text = work.text + "\n" + original
    page.text = page.text + "\n" + copy
    match.spans = [[page_start, page_start + len(copy), work_start, work_start + len(original)]]
    session.commit()

    _sender(session, language="zh")
    notice = _draft(session, settings, language="zh")
    (item,) = [item for item in notice.items if item.match_id == match.id]
    ((quoted_original, quoted_copy),) = item.passages
    assert quoted_original.endswith("…") and quoted_copy.endswith("…")
    assert max(len(quoted_original), len(quoted_copy)) == PASSAGE_LIMIT + 1
    without_ads = quoted_copy[:-1].replace("（本站广告）", "")
    assert normalize(quoted_original[:-1]).text == normalize(without_ads).text
    assert f"原文：{quoted_original}" in notice.text and f"侵权内容：{quoted_copy}" in notice.text
