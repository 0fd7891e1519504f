"""Chapters split over several pages ("下一页"): compare the parts joined, once the site's crawl has settled.

The crawler records on each page the URL of its chapter's next part (``pages.next_part_url``,
:mod:`crawler.multipage`). When a site settles (:func:`compare.templates.settle_site`, after every page of the
crawl is compared), :func:`settle_chains` follows those links among the site's stored pages, joins each
chain's texts (``"\\n"`` between parts) into one document, compares it with the registered works (the site's
template ignored) and records what it copies on the chain's **first page**:

- the match's ``methods`` end with ``"multipage"`` (found on the joined chapter);
- its ``spans`` are the passages on the first page, in that page's own text as for any match (so the evidence
  view, reports and the API show them unchanged); ``part_spans`` holds the passages on the later parts, one
  entry per part ``{"page_id", "url", "part", "spans"}`` (``part`` 2, 3... in chain order; offsets in that
  part's text). A passage running over a page break is cut there (the work offsets of the cut are
  proportional).

Each page keeps its own verdicts too: a part that copies a chapter on its own is a match of its own. A match
found on the joined parts is never taken down by one part's own verdict
(:func:`compare.service.record_matches` leaves it to the joined comparison and to the re-check); a settling
that finds it again points its spans into the parts' current texts (it rests on the page again), and one that
no longer finds it drops it only if nothing but the settling ever recorded it (a match with checks, a
takedown, a review or kept evidence stays). Chains are built from the set of stored pages alone (heads in URL
order, each followed to its end), so the verdict depends neither on the order the parts arrived in nor on the
run mode. A chain with a part missing (failed, not crawled) joins the parts present from its first page on, up
to the gap."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from fptrack.compare import chapter_index
from fptrack.compare.licensing import is_licensed, licensed_hosts
from fptrack.compare.service import Verdict, compare_document
from fptrack.core.settings import Settings
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.storage.chunks import id_chunks
from fptrack.storage.match_life import next_due, rest_on_page
from fptrack.storage.models import Match, MatchNote, MatchStatus, Page, ReviewDecision, utcnow

__all__ = ["MULTIPAGE_METHOD", "ChainPart", "chains_of", "join_parts", "map_spans", "settle_chains"]

MULTIPAGE_METHOD = "multipage"
MAX_PARTS = 50  # a chain longer than this is cut: a chapter is not 50 pages, a crawler trap may be


@dataclass(frozen=True)
class ChainPart:
    page_id: int
    url: str
    text: str
    next_url: str


def chains_of(pages: Mapping[str, ChainPart]) -> list[list[ChainPart]]:
    """The chains of two parts or more among ``pages`` (URL -> part): each starts at a page no other page
    names as its next part, and follows ``next_url`` while the next part is present, has text and was not
    seen. Heads in URL order: the answer depends on the pages alone."""
    targets = {part.next_url for part in pages.values() if part.next_url}
    chains: list[list[ChainPart]] = []
    for url in sorted(pages):
        if url in targets or not pages[url].next_url or not pages[url].text:
            continue
        chain = [pages[url]]
        seen = {url}
        while len(chain) < MAX_PARTS:
            following = pages.get(chain[-1].next_url)
            if following is None or following.url in seen or not following.text:
                break
            chain.append(following)
            seen.add(following.url)
        if len(chain) >= 2:
            chains.append(chain)
    return chains


def join_parts(texts: Sequence[str]) -> tuple[str, list[int]]:
    """The joined document and the offset of each part in it."""
    offsets, position = [], 0
    for text in texts:
        offsets.append(position)
        position += len(text) + 1
    return "\n".join(texts), offsets


def map_spans(
    spans: Sequence[tuple[int, int, int, int]], offsets: Sequence[int], lengths: Sequence[int]
) -> list[list[list[int]]]:
    """Spans of the joined document -> the spans of each part, in that part's own text (one list per part)."""
    mapped: list[list[list[int]]] = [[] for _ in offsets]
    for doc_start, doc_end, work_start, work_end in spans:
        for number, (offset, length) in enumerate(zip(offsets, lengths, strict=True)):
            start, end = max(doc_start, offset), min(doc_end, offset + length)
            if start >= end:
                continue
            width = max(doc_end - doc_start, 1)
            piece_start = work_start + (work_end - work_start) * (start - doc_start) // width
            piece_end = work_start + (work_end - work_start) * (end - doc_start) // width
            mapped[number].append([start - offset, end - offset, piece_start, piece_end])
    return mapped


def _load_parts(session: Session, site_id: int) -> dict[str, ChainPart]:
    columns = (Page.id, Page.url, Page.text, Page.next_part_url)
    ok = (Page.site_id == site_id) & (Page.status == 200)
    heads = session.execute(select(*columns).where(ok, Page.next_part_url != "")).all()
    parts = {
        str(url): ChainPart(int(i), str(url), str(text or ""), str(nxt or "")) for i, url, text, nxt in heads
    }
    missing = sorted({part.next_url for part in parts.values()} - set(parts))
    for start in range(0, len(missing), 500):
        for i, url, text, nxt in session.execute(
            select(*columns).where(ok, Page.url.in_(missing[start : start + 500]))
        ):
            parts[str(url)] = ChainPart(int(i), str(url), str(text or ""), str(nxt or ""))
    return parts


def settle_chains(
    session: Session,
    site_id: int,
    settings: Settings,
    *,
    template: Collection[int] = (),
    unchanged: bool = False,
) -> int:
    """Compare the site's multi-page chapters joined and record their matches on their first pages (see the
    module docstring); drop the machine-made "multipage" matches that no longer hold. Returns the number of
    chains.

    ``unchanged``: no page of the site changed since it last settled (:func:`compare.templates.settle_pages`),
    so that settling left multi-page matches only on today's chains (the others it dropped, or they have a
    history and stay): only those pages' matches are looked at, not every match of a 20,000-page site."""
    # the registry as it stands until this settling commits: a work registered meanwhile waits, and its
    # look-up then finds these chains' matches in place, which the drop below could otherwise take for stale
    chapter_index.hold_registry(session)
    parts = _load_parts(session, site_id)
    chains = chains_of(parts)
    now = utcnow()
    kept: set[int] = set()
    licences: dict[int, list[str]] = {}
    for chain in chains:
        texts = [part.text for part in chain]
        joined, offsets = join_parts(texts)
        verdicts = [
            v
            for v in compare_document(session, fingerprint_text(joined), settings, ignored_codes=template)
            if v.flagged
        ]
        head = chain[0]
        existing = {
            m.chapter_id: m for m in session.scalars(select(Match).where(Match.page_id == head.page_id))
        }
        for verdict in verdicts:
            match = _record(session, head, verdict, existing.get(verdict.chapter_id), licences, now, settings)
            first, *later = map_spans(verdict.spans, offsets, [len(t) for t in texts])
            match.spans = first
            match.part_spans = [
                {"page_id": part.page_id, "url": part.url, "part": number, "spans": spans}
                for number, (part, spans) in enumerate(zip(chain[1:], later, strict=True), start=2)
            ]
            session.flush()
            kept.add(int(match.id))
    rest_on_page(session, kept)
    _drop_stale(
        session, site_id, kept, among=[part.page_id for part in parts.values()] if unchanged else None
    )
    return len(chains)


def _record(
    session: Session,
    head: ChainPart,
    verdict: Verdict,
    match: Match | None,
    licences: dict[int, list[str]],
    now: datetime,
    settings: Settings,
) -> Match:
    if verdict.work_id not in licences:
        licences[verdict.work_id] = licensed_hosts(session, verdict.work_id)
    status = MatchStatus.LICENSED if is_licensed(head.url, licences[verdict.work_id]) else MatchStatus.FLAGGED
    if match is None:
        match = Match(
            page_id=head.page_id,
            work_id=verdict.work_id,
            chapter_id=verdict.chapter_id,
            first_seen=now,
            status=status,
            recheck_due_at=next_due(settings, now, now),
        )
        session.add(match)
    elif match.status in MatchStatus.machine_made():
        match.status = status  # a reviewer's decision (confirmed, dismissed) stands
    match.score = verdict.score
    match.methods = [*verdict.methods, MULTIPAGE_METHOD]
    match.last_seen = now
    return match


def _drop_stale(
    session: Session, site_id: int, kept: set[int], *, among: Sequence[int] | None = None
) -> None:
    """Machine-made "multipage" matches of the site's pages (of ``among`` only, when given) that this settling
    did not find again and that nothing else ever recorded (no check, takedown, review or kept evidence):
    false positives of an earlier settling. The others stay; their page's re-check follows them."""
    columns = (
        Match.id,
        Match.methods,
        Match.status,
        Match.recheck_state,
        Match.taken_down_at,
        Match.down_seen_at,
        Match.evidence_version_id,
    )
    if among is None:
        query = select(*columns).join(Page, Page.id == Match.page_id).where(Page.site_id == site_id)
        rows = list(session.execute(query))
    else:
        rows = [
            row
            for chunk in id_chunks(among)
            for row in session.execute(select(*columns).where(Match.page_id.in_(chunk)))
        ]
    machine_made = MatchStatus.machine_made()
    stale = [
        int(row.id)
        for row in rows
        if MULTIPAGE_METHOD in (row.methods or ())
        and int(row.id) not in kept
        and row.status in machine_made
        and row.recheck_state is None
        and row.taken_down_at is None
        and row.down_seen_at is None
        and row.evidence_version_id is None
    ]
    reviewed: set[int] = set()
    for chunk in id_chunks(stale):
        reviewed.update(
            session.scalars(select(ReviewDecision.match_id).where(ReviewDecision.match_id.in_(chunk)))
        )
        reviewed.update(session.scalars(select(MatchNote.match_id).where(MatchNote.match_id.in_(chunk))))
    for chunk in id_chunks([i for i in stale if i not in reviewed]):
        session.execute(delete(Match).where(Match.id.in_(chunk)))
