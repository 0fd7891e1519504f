"""The listings of matches and works that the admin and the command line share (``services.queries``), on
SQLite and PostgreSQL: the command line's selections (ids, first seen first, works by id) through the same
filter and query as the admin's pages."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from fptrack.services.queries import MatchFilter, count_matches, iter_matches, list_matches, work_rows
from tests.support.admin_seed import WORK_TEXT, seed


def test_a_filter_on_ids_lists_and_counts_those_matches_only(session: Session) -> None:
    seeded = seed(session)
    newest_first = list(seeded.match_ids_newest_first)
    oldest_first = list(reversed(newest_first))
    assert [m.id for m in iter_matches(session, MatchFilter(order="asc"))] == oldest_first
    assert [m.id for m in iter_matches(session, MatchFilter())] == newest_first

    picked = MatchFilter(ids=(seeded.plain_match_id, seeded.hostile_match_id), order="asc")
    assert [m.id for m in iter_matches(session, picked)] == [seeded.hostile_match_id, seeded.plain_match_id]
    assert count_matches(session, picked) == 2
    page = list_matches(session, picked, number=1, per_page=1)
    assert [m.id for m in page.items] == [seeded.hostile_match_id] and page.total == 2 and page.has_next
    # with a status the ids are narrowed, not widened; the count is taken from the matches, not the roll-up
    only_flagged = MatchFilter(status="flagged", ids=picked.ids)
    assert [m.id for m in iter_matches(session, only_flagged)] == [seeded.hostile_match_id]
    assert count_matches(session, only_flagged) == 1
    assert count_matches(session, MatchFilter(status="flagged")) == 1
    assert "ids" not in MatchFilter(ids=(1,)).as_args()


def test_works_listed_newest_first_or_by_id_with_their_length(session: Session) -> None:
    seeded = seed(session)
    by_id = work_rows(session, order="id")
    assert [row.id for row in by_id] == sorted([seeded.work_id, seeded.other_work_id])
    assert {row.id for row in work_rows(session)} == {row.id for row in by_id}
    work = next(row for row in by_id if row.id == seeded.work_id)
    assert (work.chapters, work.matches, work.characters) == (2, 3, len(WORK_TEXT))
    assert [row.characters for row in work_rows(session, seeded.work_id)] == [len(WORK_TEXT)]
    with pytest.raises(ValueError, match="order must be one of newest, id"):
        work_rows(session, order="title")
