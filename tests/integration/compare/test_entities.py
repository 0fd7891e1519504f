"""The named-entity index (compare.entities) on both databases: registering a work fills it (through
``compare.service.fingerprint_work``), a page translated into English with the names romanized gets its
chapter first, an unrelated English page and a page naming a few heroes get nothing, and the rows follow a
work fingerprinted again or removed."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare import entities, service
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for
from fptrack.storage.housekeeping import delete_works
from fptrack.storage.models import Chapter, EntityChapter, EntityPosting, EntityTerm

# Each chapter names its people and places in an order of its own; some names are in several chapters.
SANGUO = [
    ("第一回 桃园结义", "刘备 关羽 张飞 涿州 黄巾 张角 卢植 董卓 洛阳"),
    ("第二回 怒鞭督邮", "董卓 张飞 督邮 刘备 关羽 何进 洛阳"),
    ("第三回 议温明", "吕布 丁原 李肃 袁绍 曹操 王允 郭汜 李儒 张济 杨奉 董卓 洛阳"),
    ("第四回 废汉帝", "曹操 陈宫 吕伯奢 中牟 袁绍 董卓 洛阳"),
]
XIYOU = [
    ("第一回 大闹天宫", "花果山 美猴王 东海 龙王 敖广 玉帝 李靖 哪吒 南天门 太上老君 孙悟空"),
    ("第二回 魏征斩龙", "长安 唐王 魏征 泾河 袁守诚 唐僧 孙悟空"),
]
FILLER = "{a}引兵来到城下，{b}出马迎敌。两军相对，鼓声大作。"


def _work_text(title: str, chapters: list[tuple[str, str]]) -> bytes:
    parts = [title, ""]
    for heading, names in chapters:
        people = names.split()
        body = "".join(FILLER.format(a=a, b=b) for a, b in zip(people, people[1:] + people[:1], strict=True))
        parts += [heading, body * 2, ""]
    return "\n".join(parts).encode("utf-8")


def _register(session: Session, settings: Settings, title: str, chapters: list[tuple[str, str]]) -> int:
    work = register_work(session, _work_text(title, chapters), source_name=f"{title}.txt", title=title)
    service.fingerprint_work(session, work.work_id, settings)
    session.commit()
    return work.work_id


def _assert_terms_and_stamp_agree(session: Session) -> None:
    """``entity_terms`` and the stamp say what a GROUP BY and a count over the rows would."""
    whole = select(EntityPosting.term, func.count()).group_by(EntityPosting.term)
    terms = {str(t): int(n) for t, n in session.execute(select(EntityTerm.term, EntityTerm.chapters))}
    assert {t: n for t, n in terms.items() if n} == {str(t): int(n) for t, n in session.execute(whole)}
    assert min(terms.values(), default=0) >= 0
    assert entities._stamp(session)[1] == session.scalar(select(func.count()).select_from(EntityChapter))


TRANSLATED = (
    "Now when Lü Bu heard that Ting Yüan was dead, he went to Li Su. Then Yuan Shao and Ts'ao Ts'ao met "
    "Wang Yun at the capital, and Kuo Ssu sang for them; Li Ju poured the wine, Chang Chi and Yang Feng "
    "kept the gate. Tung Cho rode into Lo-yang in triumph."
)


def test_a_translated_page_gets_its_chapter_first_and_unrelated_pages_nothing(
    session: Session, settings: Settings
) -> None:
    sanguo = _register(session, settings, "三国演义", SANGUO)
    _register(session, settings, "西游记", XIYOU)
    found = entities.candidates(session, TRANSLATED, 12)
    titles = [(session.get(Chapter, c).title, s) for c, s in found]  # type: ignore[union-attr]
    assert found and session.get(Chapter, found[0][0]).work_id == sanguo, titles  # type: ignore[union-attr]
    assert titles[0][0].startswith("第三回"), titles
    assert (
        entities.candidates(
            session,
            "The quick brown fox jumps over the lazy dog. Alice met Bob in London and Paris; "
            "Charles Dickens wrote of Oliver Twist, and Jane Austen of Elizabeth Bennet.",
            12,
        )
        == []
    )
    assert entities.candidates(session, "刘备、关羽、张飞三位英雄，读来令人感慨。", 12) == []
    assert entities.candidates(session, "", 12) == []


def test_a_chinese_rewrite_names_its_chapter(session: Session, settings: Settings) -> None:
    _register(session, settings, "三国演义", SANGUO)
    assert entities.candidates(session, TRANSLATED, 12)  # the vocabulary held before the next work
    xiyou = _register(session, settings, "西游记", XIYOU)  # read alone: only added
    _assert_terms_and_stamp_agree(session)
    page = (
        "花果山上的美猴王，去东海寻龙王敖广讨了兵器。玉帝差李靖父子擒他，哪吒败回南天门，"
        "太上老君也奈何不得这孙悟空。"
    )
    found = entities.candidates(session, page, 12)
    first = session.get(Chapter, found[0][0]) if found else None
    assert first is not None and first.work_id == xiyou


def test_the_rows_follow_the_work(session: Session, settings: Settings) -> None:
    sanguo = _register(session, settings, "三国演义", SANGUO)
    rows = session.scalar(select(func.count()).select_from(EntityPosting))
    indexed = session.scalar(select(func.count()).select_from(EntityChapter))
    assert rows and indexed == session.scalar(select(func.count()).select_from(Chapter))
    service.fingerprint_work(session, sanguo, settings)  # again: replaced, not doubled
    session.commit()
    assert session.scalar(select(func.count()).select_from(EntityPosting)) == rows
    _assert_terms_and_stamp_agree(session)
    assert entities.candidates(session, TRANSLATED, 12)
    session.execute(delete(EntityChapter))  # as a work registered before migration 0035 stands
    session.execute(delete(EntityPosting))
    _assert_terms_and_stamp_agree(session)
    assert entities.index_missing(session) == [sanguo] and entities.index_missing(session) == []
    assert session.scalar(select(func.count()).select_from(EntityPosting)) == rows
    _assert_terms_and_stamp_agree(session)
    delete_works(session, [sanguo])
    session.commit()
    assert session.scalar(select(func.count()).select_from(EntityPosting)) == 0
    assert session.scalar(select(func.count()).select_from(EntityChapter)) == 0
    _assert_terms_and_stamp_agree(session)
    assert entities.candidates(session, TRANSLATED, 12) == []


def test_a_long_lived_process_never_returns_a_removed_work_and_sees_one_registered_elsewhere(
    engine: Engine, settings: Settings
) -> None:
    """One session stands for a long-lived worker (its term cache held across pages); works are registered
    and removed through other connections, as another process would (nothing of theirs touches the cache)."""
    other = sessionmaker(bind=create_engine_for(settings))
    with Session(engine) as worker:
        assert entities.candidates(worker, TRANSLATED, 12) == []
        worker.commit()
        with other() as writer:
            sanguo = _register(writer, settings, "三国演义", SANGUO)
        found = entities.candidates(worker, TRANSLATED, 12)  # registered elsewhere: seen at once
        worker.commit()
        chapters = {c.id for c in worker.scalars(select(Chapter).where(Chapter.work_id == sanguo))}
        assert found and {c for c, _ in found} <= chapters
        with other() as writer:
            xiyou = _register(writer, settings, "西游记", XIYOU)
            delete_works(writer, [sanguo])
            writer.commit()
        assert entities.candidates(worker, TRANSLATED, 12) == []  # its chapters gone, never returned
        worker.commit()
        with other() as writer:  # registered again (new chapter ids), the cache read before stays right
            again = _register(writer, settings, "三国演义", SANGUO)
        found = entities.candidates(worker, TRANSLATED, 12)
        worker.commit()
        kept = {c.id for c in worker.scalars(select(Chapter).where(Chapter.work_id == again))}
        assert found and {c for c, _ in found} <= kept and not {c for c, _ in found} & chapters
        with other() as writer:
            delete_works(writer, [again, xiyou])
            writer.commit()
        assert entities.candidates(worker, TRANSLATED, 12) == []
        _assert_terms_and_stamp_agree(worker)


def test_the_term_cache_stays_within_its_bound_and_answers_alike(
    session: Session, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(session, settings, "三国演义", SANGUO)
    entities._caches.clear()
    whole = entities.candidates(session, TRANSLATED, 12)
    entities._caches.clear()
    monkeypatch.setattr(entities, "CACHED_TERMS", 40)
    for _ in range(2):  # cold, then with what the bound let stay
        assert entities.candidates(session, TRANSLATED, 12) == whole
        (cache,) = entities._caches.values()
        assert 0 < len(cache.rows) <= 40
    assert whole


def test_candidates_among_scores_only_the_chapters_asked_about(session: Session, settings: Settings) -> None:
    _register(session, settings, "三国演义", SANGUO)
    xiyou = _register(session, settings, "西游记", XIYOU)
    page = (
        "花果山上的美猴王，去东海寻龙王敖广讨了兵器。玉帝差李靖父子擒他，哪吒败回南天门，"
        "太上老君也奈何不得这孙悟空。"
    )
    chapters = {
        c.title.split()[0]: c.id for c in session.scalars(select(Chapter).where(Chapter.work_id == xiyou))
    }
    everywhere = dict(entities.candidates(session, page, 12))
    among = entities.candidates_among(session, page, [chapters["第一回"], chapters["第二回"]], 12)
    assert [c for c, _ in among] == [chapters["第一回"]]
    assert among[0][1] == pytest.approx(everywhere[chapters["第一回"]], rel=0.05)
    # the chapters asked about are the only ones that can come back, and asking about none asks nothing
    assert entities.candidates_among(session, page, [chapters["第二回"]], 12) == []
    assert entities.candidates_among(session, page, [], 12) == []


def test_the_posting_cache_answers_alike_and_forgets_a_removed_work(
    engine: Engine, settings: Settings
) -> None:
    """candidates_among keeps the chapters' postings a long-lived process read (the faint path asks about the
    same chapters page after page); a work removed elsewhere changes the stamp, and its chapters are never
    scored from what was held."""
    other = sessionmaker(bind=create_engine_for(settings))
    page = (
        "花果山上的美猴王，去东海寻龙王敖广讨了兵器。玉帝差李靖父子擒他，哪吒败回南天门，"
        "太上老君也奈何不得这孙悟空。"
    )
    with other() as writer:
        xiyou = _register(writer, settings, "西游记", XIYOU)
    with Session(engine) as worker:
        chapters = [c.id for c in worker.scalars(select(Chapter).where(Chapter.work_id == xiyou))]
        first = entities.candidates_among(worker, page, chapters, 12)
        worker.commit()
        assert first and entities.candidates_among(worker, page, chapters, 12) == first  # from the cache
        worker.commit()
        with other() as writer:
            delete_works(writer, [xiyou])
            writer.commit()
        assert entities.candidates_among(worker, page, chapters, 12) == []
