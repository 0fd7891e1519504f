"""A notice for a copy that keeps the meaning, not the words (issue 36), on SQLite and PostgreSQL: it names
the right of translation (翻译权, 著作权法 第十条第一款第（十五）项) or of adaptation
(改编权, （十四）) beside 信息网络传播权 (（十二）), and 17 U.S.C. 106(2) beside 106(1), (3) and (5); it
quotes aligned sentence pairs (original | copy, with their similarity) and the coverage, not exact passages;
an exact copy's notice names 信息网络传播权 and 106(1), (3), (5) only. The rights chosen and the pairs
quoted are unit-tested too."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime

import pytest
from markupsafe import escape
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.jobs.notice_render import item_kind, item_pairs, missing_elements, render_html
from fptrack.services.evidence.alignment import (
    AlignedPair,
    Alignment,
    kind_label,
    quoted_pairs,
    read_alignment,
)
from fptrack.services.rights import rights_in_short, rights_infringed, rights_named
from fptrack.storage.models import Match, Work
from tests.support.admin_seed import SCRIPT, Seeded
from tests.support.meaning_seed import (
    CHAPTER_SENTENCES,
    CHAPTER_TWO_SENTENCES,
    PAGE_SENTENCES,
    PAGE_TWO_SENTENCES,
    add_meaning_match,
)
from tests.unit.jobs.test_notices import _draft, _sender, seeded

__all__ = ["seeded"]

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


# ---------------------------------------------------------------------------------------- the rights chosen


@pytest.mark.parametrize(
    ("kind", "rights"),
    [
        (None, ("communication",)),
        ("rewrite", ("communication", "adaptation")),
        ("translation:en", ("communication", "translation")),
        ("translation:vi", ("communication", "translation")),
    ],
)
def test_the_rights_infringed_follow_the_kind_of_copy(kind: str | None, rights: tuple[str, ...]) -> None:
    assert rights_infringed(kind) == rights


def test_each_side_names_the_articles() -> None:
    exact_zh, exact_en = rights_named(None, "zh"), rights_named(None, "en")
    assert "信息网络传播权" in exact_zh and "第（十二）项" in exact_zh and "翻译权" not in exact_zh
    assert "106(1), (3) and (5)" in exact_en and "106(2)" not in exact_en
    translation_zh, translation_en = (
        rights_named("translation:en", "zh"),
        rights_named("translation:en", "en"),
    )
    assert "信息网络传播权" in translation_zh and "翻译权（同款第（十五）项）" in translation_zh
    assert "第106条" in translation_zh and "第(2)项" in translation_zh
    assert "翻译权, Article 10(1)(15)" in translation_en
    assert "106(1), (3) and (5)" in translation_en and "(a translation), 17 U.S.C. 106(2)" in translation_en
    rewrite_zh, rewrite_en = rights_named("rewrite", "zh"), rights_named("rewrite", "en")
    assert "改编权（同款第（十四）项）" in rewrite_zh and "翻译权" not in rewrite_zh
    assert "(an adaptation), 17 U.S.C. 106(2)" in rewrite_en
    assert rights_in_short([None, "translation:en", "rewrite"]) == "信息网络传播权、翻译权、改编权"
    assert rights_in_short([]) == "信息网络传播权"


def test_kinds_are_named_in_both_languages() -> None:
    assert kind_label("rewrite", "zh") == "洗稿改写" and kind_label("rewrite", "en") == "Rewrite"
    assert kind_label("translation:en", "zh") == "翻译（英文）"
    assert kind_label("translation:en", "en") == "Translation (English)"
    assert kind_label("translation:vi", "zh") == "翻译（越南文）"
    assert kind_label("translation:xx", "en") == "Translation (xx)"  # a language without a name: its code
    assert kind_label(None, "zh") == ""


# ------------------------------------------------------------------------------------------ the pairs read


def test_the_pairs_are_cut_from_the_texts_and_a_pair_that_does_not_fit_is_left_out() -> None:
    page, chapter = "ab. cd. ef.", "甲。乙。丙。"
    stored = {
        "coverage": 1.7,  # clamped
        "pairs": [
            [0, 3, 0, 2, 0.9],
            [4, 7, 2, 4, 0.8],
            [8, 99, 4, 6, 0.7],
            "x",
            [5, 4, 0, 1, 0.5],
            [8, 11, 4, 6],
        ],
        "page_sentences": 3,
        "chapter_sentences": 3,
        "model": "m",
    }
    alignment = read_alignment("translation:en", stored, page, chapter)
    assert alignment is not None and alignment.coverage == 1.0 and alignment.model == "m"
    assert [(p.number, p.page_text, p.chapter_text, p.similarity) for p in alignment.pairs] == [
        (1, "ab.", "甲。", 0.9),
        (2, "cd.", "乙。", 0.8),
        (3, "ef.", "丙。", 0.0),
    ]
    assert read_alignment(None, stored, page, chapter) is None  # an exact copy
    assert read_alignment("rewrite", None, page, chapter) is None


def _alignment(count: int) -> Alignment:
    pairs = tuple(
        AlignedPair(n, 0, 1, 0, 1, 0.5 + n / 100, f"copy {n}", f"原文 {n}" + "长" * 50)
        for n in range(1, count + 1)
    )
    return Alignment("rewrite", 0.7, pairs, count, count, "m")


@pytest.mark.parametrize("count", [1, 2, 5, 6, 40])
def test_a_notice_quotes_a_few_pairs_spread_from_the_first_to_the_last(count: int) -> None:
    quoted = quoted_pairs(_alignment(count), 5, 10)
    assert len(quoted) == min(5, count)
    assert quoted[0][1] == "copy 1" and quoted[-1][1] == f"copy {count}"
    assert all(len(original) <= 11 and original.endswith("…") for original, _copy, _similarity in quoted)
    numbers = [int(copy.split()[1]) for _original, copy, _similarity in quoted]
    assert numbers == sorted(set(numbers))  # in order, none twice
    assert quoted_pairs(_alignment(count), 0, 10) == []


# ------------------------------------------------------------------------------------------- the notice


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_translations_notice_names_the_translation_right_and_quotes_the_aligned_pairs(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    match_id = add_meaning_match(session, seeded)
    _sender(session)
    notice = _draft(session, settings, language=language, host="translated.example", now=NOW)
    [item] = notice.items
    assert item.match_id == match_id and item_kind(item) == "translation:en"
    assert item_pairs(item) == [
        [CHAPTER_SENTENCES[0], PAGE_SENTENCES[0], 0.91],
        [CHAPTER_SENTENCES[1], PAGE_SENTENCES[1], 0.87],
    ]
    text = notice.text
    if language == "zh":
        assert "侵犯了山中文化有限公司依法享有的信息网络传播权、翻译权" in text
        assert "侵权方式：将原章节翻译为英文" in text and "覆盖原章节 84%" in text
        assert (
            "被侵犯的权利：信息网络传播权（《中华人民共和国著作权法》第十条第一款第（十二）项）、翻译权"
            in text
        )
        assert "第 1 对，相似度 0.91" in text and "共 2 对" in text
    else:
        assert "Kind of copy: a translation of the chapter into English" in text
        assert "84% of the original chapter" in text
        assert (
            "翻译权, Article 10(1)(15)" in text
            and "17 U.S.C. 106(2)" in text
            and "106(1), (3) and (5)" in text
        )
        assert "Pair 2, similarity 0.87" in text
    assert f"{CHAPTER_SENTENCES[0]}" in text and PAGE_SENTENCES[1] in text
    assert missing_elements(notice) == []  # the pairs are its passages: 512(c)(3)(A)(iii), 第十四条（三）
    html = render_html(notice, NOW)
    assert SCRIPT not in html and str(escape(PAGE_SENTENCES[0])) in html  # crawled text stays text
    assert 'class="side-by-side aligned-pairs"' in html and '<td class="similarity">0.91</td>' in html
    assert "17 U.S.C. 106(2)" in html if language == "en" else "翻译权（同款第（十五）项）" in html


def test_a_rewrites_notice_names_the_adaptation_right(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    add_meaning_match(session, seeded, kind="rewrite")
    _sender(session)
    notice = _draft(session, settings, language="zh", host="translated.example", now=NOW)
    assert "依法享有的信息网络传播权、改编权" in notice.text and "改编权（同款第（十四）项）" in notice.text
    assert "侵权方式：洗稿改写" in notice.text and "翻译权" not in notice.text


@pytest.mark.parametrize("language", ["zh", "en"])
def test_an_exact_copys_notice_names_the_right_of_communication_only(
    session: Session, settings: Settings, seeded: Seeded, language: str
) -> None:
    _sender(session)
    notice = _draft(session, settings, language=language, now=NOW)
    assert all(item_kind(item) is None for item in notice.items)
    assert all(len(pair) == 2 for item in notice.items for pair in item_pairs(item))
    text = notice.text
    assert (
        "信息网络传播权（《中华人民共和国著作权法》" if language == "zh" else "106(1), (3) and (5)"
    ) in text
    assert "翻译权" not in text and "改编权" not in text and "106(2)" not in text
    assert "相似度" not in text and "similarity" not in text


def test_a_meaning_match_gone_from_the_database_keeps_its_notice(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    """The item keeps what was sent: the kind, the coverage and the pairs are in its passages."""
    match_id = add_meaning_match(session, seeded)
    _sender(session)
    notice = _draft(session, settings, language="en", host="translated.example", now=NOW)
    session.delete(session.get(Match, match_id))
    session.flush()
    session.expire_all()
    html = render_html(notice, NOW)
    assert "a translation of the chapter into English" in html and "106(2)" in html


def test_the_evidence_bundle_holds_the_aligned_pairs_in_the_works_offsets(
    session: Session, settings: Settings, seeded: Seeded
) -> None:
    """The bundle a notice attaches (evidence.json): the pairs of a meaning match on the second chapter, the
    work's offsets shifted by the chapter's start (a meaning match's spans are chapter offsets)."""
    add_meaning_match(session, seeded, chapter_index=2)
    _sender(session)
    notice = _draft(session, settings, language="en", host="translated.example", now=NOW)
    [item] = notice.items
    assert item.bundle is not None
    with zipfile.ZipFile(io.BytesIO(item.bundle)) as bundle:
        document = json.loads(bundle.read("evidence.json"))
    work = session.get(Work, seeded.work_id)
    assert work is not None and work.chapters[1].start > 0
    passages = document["passages"]
    assert [p["work_text"] for p in passages] == list(CHAPTER_TWO_SENTENCES)
    assert [p["page_text"] for p in passages] == list(PAGE_TWO_SENTENCES)
    assert [work.text[slice(*p["work"])] for p in passages] == list(CHAPTER_TWO_SENTENCES)
    assert [p["similarity"] for p in passages] == [0.91, 0.87]
    assert document["match"]["kind"] == "translation:en"
