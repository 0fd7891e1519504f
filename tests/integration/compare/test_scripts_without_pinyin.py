"""Works in scripts that have no pinyin (kana, Hangul, Cyrillic): their pinyin-initial string is one
placeholder per character, so only the character channels (winnowing over characters, character k-grams in the
alignment) carry evidence. On a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import random

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.compare import service
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.fingerprint.contract import CONTRACT, FingerprintContract
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.storage.models import Chapter
from testbed.kana import kana_prose

_CHINESE = (
    "春夏秋冬东南西北山川河流草木花鸟风雨雷电日月星辰"
    "城市乡村道路桥梁学校医院工厂商店朋友家人老师学生早晚快慢高低"
)


def _chinese_filler(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(_CHINESE) for _ in range(length))


def _flagged(session: Session, settings: Settings, text: str, contract: FingerprintContract) -> list[int]:
    # the product's fingerprints hold every code kind the variants below read (they only leave methods out)
    verdicts = service.compare_document(session, fingerprint_text(text), settings, contract=contract)
    return [v.chapter_id for v in verdicts if v.flagged]


def _register_kana_work(session: Session, settings: Settings, seed: int) -> list[int]:
    rng = random.Random(seed)
    body = "".join(f"第{i}章 {i}\n{kana_prose(rng, 900)}\n\n" for i in range(1, 4))
    work = register_work(session, f"かなのものがたり{seed}\n\n{body}".encode(), source_name=f"kana{seed}.txt")
    service.index_work(session, work.work_id, settings)
    return list(
        session.scalars(select(Chapter.id).where(Chapter.work_id == work.work_id).order_by(Chapter.index))
    )


def test_a_kana_excerpt_is_found_through_the_character_winnowing_only(
    session: Session, settings: Settings
) -> None:
    chapters = _register_kana_work(session, settings, seed=1)
    excerpt = session.get_one(Chapter, chapters[1]).text[100:500]
    rng = random.Random(2)
    page = _chinese_filler(rng, 400) + "\n" + excerpt + "\n" + _chinese_filler(rng, 400)
    assert _flagged(session, settings, page, CONTRACT) == [chapters[1]]
    # the initials of kana are all one placeholder: winnowing over them gives no candidate
    assert _flagged(session, settings, page, CONTRACT.without("winnow")) == []


def test_unrelated_kana_text_is_not_a_copy_of_a_kana_chapter(session: Session, settings: Settings) -> None:
    """Two texts in one script without pinyin share every long run of placeholder initials: the initials
    channel must not count that as evidence."""
    _register_kana_work(session, settings, seed=1)
    other = kana_prose(random.Random(7), 1200)
    assert _flagged(session, settings, other, CONTRACT) == []
    assert _flagged(session, settings, other, CONTRACT.only("winnow_py")) == []
