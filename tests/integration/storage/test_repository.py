"""The store on both backends: no orphaned index rows after re-fingerprinting or deleting pages and works
(hot-bucket rows included), bulk loading, code look-ups, corpus statistics and sites."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.fingerprint.simhash import hamming
from fptrack.storage.code_index import code_holders, pages_holding
from fptrack.storage.corpus_stats import latest_corpus_stats, save_corpus_stats
from fptrack.storage.fingerprints import load_codes, load_page_codes, replace_fingerprints
from fptrack.storage.hot_buckets import forget_hot_buckets, split_hot_buckets
from fptrack.storage.housekeeping import count_orphans, delete_pages, delete_works
from fptrack.storage.index import DEFAULT_LAYOUT
from fptrack.storage.models import Chapter, CodeIndexRow, Fingerprint, Match, Page, SimhashHotRow, Site, Work
from fptrack.storage.simhash_index import bulk_load_simhashes, simhash_candidates
from fptrack.storage.sites import site_ids, site_of

LAYOUT = DEFAULT_LAYOUT
BASE = 0x0123_4567_89AB_CDEF


def _count(session: Session, model: type) -> int:
    return int(session.scalar(select(func.count()).select_from(model)) or 0)


def _work(session: Session, title: str, chapters: int) -> Work:
    work = Work(title=title, content_sha256=f"sha-{title}", text="x" * 10 * chapters)
    work.chapters = [
        Chapter(index=i, title=f"{i}", start=10 * i, end=10 * i + 10, text="x" * 10) for i in range(chapters)
    ]
    session.add(work)
    session.flush()
    return work


def _page(session: Session, n: int) -> Page:
    page = Page(url=f"http://pirate.test/{n}", final_url=f"http://pirate.test/{n}", status=200, text="t")
    session.add(page)
    session.flush()
    return page


def _codes(seed: int, n: int = 20) -> dict[str, list[tuple[int, int]]]:
    rng = random.Random(seed)
    return {
        "dna": [(rng.getrandbits(64), i) for i in range(n)],
        "winnow": [(rng.getrandbits(64), 3 * i) for i in range(n)],
    }


def _owner_rows(session: Session, *, page_ids: list[int] = (), chapter_ids: list[int] = ()) -> int:  # type: ignore[assignment]
    """Fingerprints and index rows still hanging off the given owners."""
    ids = select(Fingerprint.id).where(
        Fingerprint.page_id.in_(page_ids) | Fingerprint.chapter_id.in_(chapter_ids)
    )
    total = int(session.scalar(select(func.count()).select_from(ids.subquery())) or 0)
    for model in (CodeIndexRow, SimhashHotRow):
        total += int(
            session.scalar(select(func.count()).select_from(model).where(model.fingerprint_id.in_(ids))) or 0
        )
    return total


def test_refingerprinting_and_deleting_leave_no_orphans(session: Session) -> None:
    forget_hot_buckets()
    work = _work(session, "w", 3)
    other = _work(session, "other", 1)
    chapter_ids = [c.id for c in work.chapters]
    for i, chapter_id in enumerate([*chapter_ids, other.chapters[0].id]):
        replace_fingerprints(
            session,
            owner="chapter",
            owner_id=chapter_id,
            layout=LAYOUT,
            simhash=BASE ^ (1 << i),
            codes=_codes(i),
        )
    pages = [_page(session, n) for n in range(6)]
    for n, page in enumerate(pages):
        replace_fingerprints(
            session,
            owner="page",
            owner_id=page.id,
            layout=LAYOUT,
            simhash=BASE ^ (3 << (2 * n)),
            codes=_codes(100 + n),
        )
    session.add(Match(page_id=pages[0].id, work_id=work.id, chapter_id=chapter_ids[0], score=1.0))
    # every bucket of these near-duplicates is re-split, so hot index rows exist and must go too
    report = split_hot_buckets(session, LAYOUT, mu=0.0, min_size=1)
    assert report.split and report.rows_filed > 0
    session.commit()
    assert _count(session, SimhashHotRow) > 0

    # re-fingerprinting replaces rows: nothing refers to the old fingerprints, the new Simhash is filed under
    # the sub-keys of exactly the re-split buckets it falls in
    old_ids = list(session.scalars(select(Fingerprint.id).where(Fingerprint.page_id == pages[1].id)))
    before = (_count(session, Fingerprint), _count(session, CodeIndexRow))
    replace_fingerprints(
        session, owner="page", owner_id=pages[1].id, layout=LAYOUT, simhash=BASE ^ (1 << 40), codes=_codes(7)
    )
    session.commit()
    assert (_count(session, Fingerprint), _count(session, CodeIndexRow)) == before
    for model in (CodeIndexRow, SimhashHotRow):
        assert (
            session.scalar(select(func.count()).select_from(model).where(model.fingerprint_id.in_(old_ids)))
            == 0
        )
    new_id = session.scalar(
        select(Fingerprint.id).where(Fingerprint.page_id == pages[1].id, Fingerprint.kind == LAYOUT.kind)
    )
    hot = {(t, k) for t, k, _ in report.split}
    hot_tables = [t for t, key in LAYOUT.keys(BASE ^ (1 << 40)) if (t, key) in hot]
    assert hot_tables
    filed = session.scalar(
        select(func.count()).select_from(SimhashHotRow).where(SimhashHotRow.fingerprint_id == new_id)
    )
    assert filed == len(hot_tables) * (LAYOUT.k + 1)
    assert {h.owner_id for h in simhash_candidates(session, BASE ^ (1 << 40), LAYOUT, owner="page")} >= {
        pages[1].id
    }
    # a page keeps the template keys of its winnowing hashes (high 32 bits, no positions) and a sample of
    # every kind, not code rows
    assert load_page_codes(session, [pages[1].id])[pages[1].id].tolist() == sorted(
        {(c - (1 << 64) if c >= 1 << 63 else c) >> 32 for c, _ in _codes(7)["winnow"]}
    )
    with pytest.raises(ValueError, match="page_codes|samples"):
        load_codes(session, owner="page", owner_id=pages[1].id, kind="dna")

    # deleting pages and works takes their fingerprints, index rows and matches along
    assert delete_pages(session, [pages[0].id, pages[2].id]) == 2
    assert delete_works(session, [work.id]) == 1
    session.commit()
    assert _owner_rows(session, page_ids=[pages[0].id, pages[2].id], chapter_ids=chapter_ids) == 0
    assert load_page_codes(session, [pages[0].id, pages[2].id]) == {}
    assert _count(session, Match) == 0
    assert set(count_orphans(session).values()) == {0}
    remaining = {h.owner_id for h in simhash_candidates(session, BASE, LAYOUT, owner="chapter")}
    assert remaining == {other.chapters[0].id}
    assert code_holders(session, "dna", [c for c, _ in _codes(0)["dna"]], owner="chapter") == {}
    held = code_holders(session, "dna", [c for c, _ in _codes(3)["dna"]], owner="chapter")
    assert len(held) == 20 and set().union(*held.values()) == {other.chapters[0].id}
    # ORM deletes (as the admin would do them) cascade the same way
    session.delete(session.get(Page, pages[3].id))
    session.commit()
    assert _owner_rows(session, page_ids=[pages[3].id]) == 0
    assert set(count_orphans(session).values()) == {0}
    forget_hot_buckets()


def test_an_owner_without_a_simhash_gets_no_simhash_row(session: Session) -> None:
    """The page path without Simhash (fingerprint.contract): codes stored, no Simhash row, and
    re-fingerprinting a page that had one (written by an earlier release) removes it."""
    page = _page(session, 0)
    replace_fingerprints(
        session, owner="page", owner_id=page.id, layout=LAYOUT, simhash=BASE, codes=_codes(1)
    )
    replace_fingerprints(
        session, owner="page", owner_id=page.id, layout=LAYOUT, simhash=None, codes=_codes(2)
    )
    session.commit()
    # no fingerprint row at all (a page's codes live in page_codes), the earlier Simhash row gone
    assert session.scalars(select(Fingerprint.kind).where(Fingerprint.page_id == page.id)).all() == []
    assert simhash_candidates(session, BASE, LAYOUT, owner="page") == []
    assert pages_holding(session, [c for c, _ in _codes(2)["dna"]]) == [page.id]
    assert pages_holding(session, [c for c, _ in _codes(1)["dna"]]) == []  # the first codes were replaced
    assert session.scalar(select(Page.fingerprinted_at).where(Page.id == page.id)) is not None


def test_bulk_load_matches_brute_force(session: Session) -> None:
    forget_hot_buckets()
    rng = np.random.default_rng(3)
    pages = [_page(session, n) for n in range(300)]
    values = rng.integers(0, 2**64, size=300, dtype=np.uint64)
    values[1::3] = values[0::3] ^ np.uint64(0b111)  # neighbours at distance 3
    pairs = np.stack([np.array([p.id for p in pages]), values.view(np.int64)], axis=1)
    assert bulk_load_simhashes(session, pairs[:200], owner="page", rebuild_indexes=True) == 200
    assert (
        bulk_load_simhashes(session, [(int(o), int(v) & (2**64 - 1)) for o, v in pairs[200:]], owner="page")
        == 100
    )
    session.commit()
    stored = {int(o): int(v) & (2**64 - 1) for o, v in pairs}
    for query in [int(v) for v in values[:30]]:
        expected = {o for o, v in stored.items() if hamming(v, query) <= 3}
        assert {h.owner_id for h in simhash_candidates(session, query, LAYOUT, owner="page")} == expected
    with pytest.raises(ValueError, match="pairs"):
        bulk_load_simhashes(session, np.zeros((3, 3), dtype=np.int64), owner="page")
    with pytest.raises(ValueError, match="owner"):
        bulk_load_simhashes(session, pairs, owner="site")  # type: ignore[arg-type]


def test_corpus_statistics_are_versioned_bytes(session: Session) -> None:
    assert latest_corpus_stats(session, "idf") is None
    assert save_corpus_stats(session, "idf", b"\x00\x01first", document_count=10) == 1
    assert save_corpus_stats(session, "idf", b"\x00\x02second", document_count=12) == 2
    assert save_corpus_stats(session, "pinyin_reference", b"ref") == 1
    session.commit()
    latest = latest_corpus_stats(session, "idf")
    assert latest is not None and (latest.version, latest.document_count, latest.payload) == (
        2,
        12,
        b"\x00\x02second",
    )
    with pytest.raises(TypeError, match="bytes"):
        save_corpus_stats(session, "idf", "text")  # type: ignore[arg-type]


def test_sites_are_created_once_per_site_key(session: Session) -> None:
    first = site_ids(session, ["Pirate.Test"])
    assert site_ids(session, ["pirate.test", "pirate.test:8080"])["pirate.test"] == first["pirate.test"]
    assert _count(session, Site) == 2
    assert site_ids(session, [" ", ""]) == {}


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://Example.com/a", "example.com"),
        ("https://example.com:443/b", "example.com"),
        ("http://127.0.0.1:8001/x", "127.0.0.1:8001"),
        ("ftp://example.com/", ""),
        ("http://[::1]:8080/", "::1:8080"),
        ("not a url", ""),
    ],
)
def test_site_of_is_host_and_non_default_port(url: str, key: str) -> None:
    assert site_of(url) == key
