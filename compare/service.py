"""The compare service: fingerprint pages and chapters, find candidates in the store, verify, record matches.

Every function takes an open :class:`~sqlalchemy.orm.Session` and leaves committing to the caller (a task, the
crawl service, a test), so one unit of work either lands whole or not at all. Pages are handled in batches:
one write of all their fingerprints, one candidate query per code kind for the whole batch, one read of the
candidate chapters, one read of their existing matches.

A page's verdicts are a function of its text, the registry and (once its site has settled) its site's template
(:mod:`compare.templates`), never of which other pages were processed before it:

- :func:`process_pages`: the crawl stage. Fingerprints, indexes and compares pages stored but not compared yet
  (a page already compared at its current content is skipped, so a task delivered twice changes nothing);
- :func:`recompare_pages`: compare already fingerprinted pages again (new works registered, a site settled);
- :func:`fingerprint_work` and :func:`index_work`: fingerprint a registered work's chapters and find the pages
  crawled before it.

A page's verdicts record the registry's serial they were compared at (``pages.registry_serial``), checked
again under :func:`compare.chapter_index.hold_registry` before they are recorded: a work registered meanwhile
is compared with then, so each page is either compared with a work or stored before the work's look-up reads.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from fptrack.compare import chapter_index
from fptrack.compare.chapters import book_segments
from fptrack.compare.licensing import is_licensed, licensed_hosts_of
from fptrack.compare.networks import observe_pages
from fptrack.compare.scoring import Evidence, decide_with, evidence_of
from fptrack.compare.verify import align
from fptrack.core.settings import Settings
from fptrack.fingerprint.arrays import distinct
from fptrack.fingerprint.contract import CONTRACT, FingerprintContract
from fptrack.fingerprint.text_fingerprints import TextFingerprints, fingerprint_text
from fptrack.storage.chunks import id_chunks
from fptrack.storage.code_index import code_holder_pairs, pages_sharing
from fptrack.storage.exchanges import prune_exchanges
from fptrack.storage.fingerprints import (
    FingerprintSet,
    Owner,
    is_postgres,
    page_sample,
    signed_codes_array,
    write_fingerprints,
)
from fptrack.storage.index import IndexLayout
from fptrack.storage.match_life import (
    IMAGES_UNREAD_NOTE,
    UNSETTLED_NOTE,
    Observation,
    next_due,
    observe,
    rest_on_page,
)
from fptrack.storage.models import (
    Chapter,
    Match,
    MatchNote,
    MatchStatus,
    Page,
    PageCodes,
    ReviewDecision,
    Work,
    utcnow,
)
from fptrack.storage.simhash_index import simhash_candidates

__all__ = [
    "ChapterDocuments",
    "ChapterInfo",
    "Recomparison",
    "Verdict",
    "compare_document",
    "fingerprint_work",
    "index_work",
    "layout_for",
    "mask_from_positions",
    "process_pages",
    "recompare_pages",
    "record_matches",
    "unsettled_pages",
    "verify_chapters",
]

METHOD_NAMES = {"winnow": "winnowing", "winnow_py": "winnowing_pinyin"}
"""How a match names the index that made its chapter a candidate (matches of earlier releases may also name
``pinyin_dna``: the names are stored as given, never looked up here)."""
_MASK_KIND = "winnow"


@dataclass(frozen=True)
class Verdict:
    """How a document relates to one chapter; ``spans`` are ``(doc_start, doc_end, work_start, work_end)`` in
    characters of the original document and the original work text."""

    work_id: int
    work_title: str
    chapter_id: int
    chapter_index: int
    chapter_title: str
    score: float
    copied_chars: int
    methods: tuple[str, ...]
    spans: tuple[tuple[int, int, int, int], ...]
    flagged: bool
    evidence: Evidence = field(default=Evidence(0, 0.0, 0), compare=False)


@dataclass(frozen=True)
class ChapterInfo:
    """What verification needs of a registered chapter."""

    id: int
    work_id: int
    work_title: str
    index: int
    title: str
    start: int
    text: str


def layout_for(settings: Settings) -> IndexLayout:
    return IndexLayout(64, settings.simhash_k, settings.simhash_blocks)


@lru_cache(maxsize=4096)
def chapter_document(text: str) -> TextFingerprints:
    """A chapter's fingerprints, kept per process: chapters are verified against many pages and never
    change."""
    return fingerprint_text(text, CONTRACT)


# ---------------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class _CodeTable:
    """The holders of a batch's codes of one kind: sorted distinct codes, and for code ``i`` the owners
    ``owners[starts[i]:starts[i + 1]]``."""

    codes: np.ndarray
    starts: np.ndarray
    owners: np.ndarray

    @classmethod
    def of_pairs(cls, pairs: np.ndarray) -> _CodeTable:
        codes, starts = np.unique(pairs[:, 0], return_index=True)
        return cls(codes, np.append(starts, len(pairs)), pairs[:, 1])

    def hits(self, query: np.ndarray) -> np.ndarray:
        """Indices (into ``codes``) of the query codes someone holds."""
        if not len(self.codes) or not len(query):
            return np.empty(0, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.codes, query), len(self.codes) - 1)
        found: np.ndarray = at[self.codes[at] == query]
        return found

    def shared_per_owner(self, hits: np.ndarray) -> dict[int, int]:
        """owner -> number of the hit codes it holds."""
        if not len(hits):
            return {}
        lengths = self.starts[hits + 1] - self.starts[hits]
        offsets = np.repeat(self.starts[hits] - np.cumsum(lengths) + lengths, lengths) + np.arange(
            lengths.sum()
        )
        owners, counts = np.unique(self.owners[offsets], return_counts=True)
        return dict(zip(owners.tolist(), counts.tolist(), strict=True))

    def held_by_at_least(self, hits: np.ndarray, minimum: int) -> set[int]:
        """The hit codes held by at least ``minimum`` owners."""
        lengths = self.starts[hits + 1] - self.starts[hits]
        return set(self.codes[hits[lengths >= minimum]].tolist())


@dataclass
class _Holders:
    """Who holds the codes of a batch of documents, per code kind (one query per kind for the whole batch)."""

    tables: dict[str, _CodeTable]
    signed: dict[int, dict[str, np.ndarray]]  # id(document) -> kind -> its distinct signed codes
    serial: int  # the registry's serial the chapter side was read at (at least: never a later one)

    @classmethod
    def fetch(cls, session: Session, documents: Iterable[TextFingerprints], *, owner: Owner) -> _Holders:
        signed: dict[int, dict[str, np.ndarray]] = {}
        wanted: dict[str, list[np.ndarray]] = defaultdict(list)
        for document in documents:
            codes = {kind: distinct(array[:, 0]) for kind, array in document.index_arrays().items()}
            signed[id(document)] = codes
            for kind, values in codes.items():
                wanted[kind].append(values)
        # the chapter side from this process's arrays (compare.chapter_index: the registry's version read once
        # for the batch, no code_index query), unless FPTRACK_CHAPTER_INDEX=database
        in_memory = None
        serial = 0
        if owner == "chapter" and chapter_index.in_memory():
            in_memory = chapter_index.snapshot(session)
            serial = in_memory.serial
        elif owner == "chapter":
            serial = chapter_index.registry_serial(session)  # read before code_index: never after the rows
        tables = {}
        for kind, arrays in wanted.items():
            query = distinct(np.concatenate(arrays))
            pairs = (
                in_memory.pairs(kind, query)
                if in_memory is not None
                else code_holder_pairs(session, kind, query.tolist(), owner=owner)
            )
            tables[kind] = _CodeTable.of_pairs(pairs)
        return cls(tables, signed, serial)

    def shared_per_owner(self, document: TextFingerprints, kind: str, *, below: int = 0) -> dict[int, int]:
        """Per owner, the document's codes of ``kind`` it holds; with ``below`` > 0 only the codes fewer than
        ``below`` owners hold count."""
        table = self.tables.get(kind)
        if table is None:
            return {}
        hits = table.hits(self.signed[id(document)].get(kind, np.empty(0, np.int64)))
        if below > 0 and len(hits):
            hits = hits[table.starts[hits + 1] - table.starts[hits] < below]
        return table.shared_per_owner(hits)

    def common(self, document: TextFingerprints, kind: str, minimum: int) -> set[int]:
        table = self.tables.get(kind)
        if table is None:
            return set()
        return table.held_by_at_least(
            table.hits(self.signed[id(document)].get(kind, np.empty(0, np.int64))), minimum
        )


def _rank_candidates(
    session: Session,
    document: TextFingerprints,
    holders: _Holders,
    layout: IndexLayout,
    *,
    owner: Owner,
    exclude_id: int | None = None,
    contract: FingerprintContract = CONTRACT,
    limit: int | None = CONTRACT.candidates.max_candidates,
    faint: dict[int, int] | None = None,
) -> dict[int, set[str]]:
    """The candidate chapters (or pages) of ``document`` with the methods that made each one, best first;
    ``faint`` receives the owners that share codes with it too few to make a candidate, with how many."""
    found: dict[int, set[str]] = defaultdict(set)
    if contract.uses("simhash") and document.simhash is not None:
        for hit in simhash_candidates(session, document.simhash, layout, owner=owner, exclude_id=exclude_id):
            found[hit.owner_id].add("simhash")
    votes: dict[int, int] = defaultdict(int)
    # a code that common_min_chapters chapters hold (a formula, a publisher's banner) says nothing about which
    # chapter a page copies, and the alignment ignores its text: it makes no chapter a candidate either
    common = contract.candidates.common_min_chapters
    for kind in contract.code_kinds():
        for owner_id, shared in holders.shared_per_owner(document, kind, below=common).items():
            if owner_id != exclude_id and shared >= contract.candidates.min_shared:
                found[owner_id].add(METHOD_NAMES[kind])
                votes[owner_id] += shared
            elif owner_id != exclude_id and faint is not None:
                faint[owner_id] = faint.get(owner_id, 0) + shared
    if faint is not None:
        for owner_id in found:
            faint.pop(owner_id, None)
    ranked = sorted(found, key=lambda o: ("simhash" not in found[o], -votes[o], o))
    return {o: found[o] for o in ranked[:limit]}


# ------------------------------------------------------------------------------------------------- masks


def mask_from_positions(length: int, positions: Iterable[int], k: int, w: int) -> np.ndarray:
    """Boolean mask over ``length`` normalised characters covering the k-grams at ``positions`` and the gaps
    of at most ``w`` characters between consecutive ones.

    Winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003) keeps at least one hash in every window of ``w``
    consecutive k-grams, so consecutive selected positions inside a shared region are at most ``w`` apart: the
    region a set of hashes stands for is rebuilt by merging their k-gram extents over such gaps.
    """
    mask = np.zeros(length, dtype=bool)
    ordered = sorted({int(p) for p in positions if 0 <= p < length})
    if not ordered:
        return mask
    start = end = ordered[0]
    for position in ordered[1:]:
        if position - end > w:
            mask[start : min(length, end + k)] = True
            start = position
        end = position
    mask[start : min(length, end + k)] = True
    return mask


def _ignore_mask(document: TextFingerprints, ignored_codes: Collection[int]) -> np.ndarray | None:
    """The normalised characters of ``document`` that its ``ignored_codes`` (winnowing hashes, signed) stand
    for."""
    if not ignored_codes:
        return None
    pairs = document.chars_codes
    ignored = signed_codes_array(list(ignored_codes))
    positions = pairs[np.isin(pairs[:, 0], ignored), 1].tolist()
    if not positions:
        return None
    return mask_from_positions(
        len(document.text), positions, CONTRACT.winnow_chars.k, CONTRACT.winnow_chars.w
    )


def _common_codes(document: TextFingerprints, holders: _Holders, contract: FingerprintContract) -> set[int]:
    """The document's winnowing hashes held by at least ``common_min_chapters`` registered chapters."""
    return holders.common(document, _MASK_KIND, contract.candidates.common_min_chapters)


# ---------------------------------------------------------------------------------------------- verifying


def verify(
    document: TextFingerprints,
    chapter: ChapterInfo,
    chapter_doc: TextFingerprints,
    methods: Collection[str],
    ignore: np.ndarray | None = None,
    contract: FingerprintContract = CONTRACT,
) -> Verdict:
    with_initials = contract.uses("align_initials")
    alignment = align(
        document.text,
        chapter_doc.text,
        document.initials if with_initials else "",
        chapter_doc.initials if with_initials else "",
        ignore=ignore,
        params=contract.align,
    )
    evidence = evidence_of(alignment)
    decision = decide_with(evidence, contract.rule)
    spans = []
    for p_start, p_end, c_start, c_end in alignment.runs:
        page_span = document.normalized.original_span(p_start, p_end)
        chapter_span = chapter_doc.normalized.original_span(c_start, c_end)
        spans.append((*page_span, chapter.start + chapter_span[0], chapter.start + chapter_span[1]))
    return Verdict(
        work_id=chapter.work_id,
        work_title=chapter.work_title,
        chapter_id=chapter.id,
        chapter_index=chapter.index,
        chapter_title=chapter.title,
        score=decision.score,
        copied_chars=decision.copied_chars,
        methods=tuple(sorted(methods)),
        spans=tuple(spans),
        flagged=decision.flagged,
        evidence=evidence,
    )


def load_chapters(session: Session, chapter_ids: Iterable[int]) -> dict[int, ChapterInfo]:
    """The chapters with these ids, in one query per chunk."""
    found: dict[int, ChapterInfo] = {}
    for chunk in id_chunks(chapter_ids):
        statement = (
            select(
                Chapter.id,
                Chapter.work_id,
                Work.title,
                Chapter.index,
                Chapter.title,
                Chapter.start,
                Chapter.text,
            )
            .join(Work, Work.id == Chapter.work_id)
            .where(Chapter.id.in_(chunk))
        )
        for row in session.execute(statement):
            found[row[0]] = ChapterInfo(*row)
    return found


def _compare_batch(
    session: Session,
    documents: Sequence[TextFingerprints],
    settings: Settings,
    *,
    ignored: Sequence[Collection[int]] | None = None,
    contract: FingerprintContract = CONTRACT,
) -> list[list[Verdict]]:
    """Verdicts of every document against its candidate chapters, best first (flagged or not).

    ``ignored``: per document, extra winnowing hashes (signed) to ignore, e.g. its site's template.
    ``contract``: the product's, or a variant with a method off (the ablation of
    ``benchmarks/piracy_eval.py``)."""
    return _compare_batch_at(session, documents, settings, ignored=ignored, contract=contract)[0]


def _compare_batch_at(
    session: Session,
    documents: Sequence[TextFingerprints],
    settings: Settings,
    *,
    ignored: Sequence[Collection[int]] | None = None,
    contract: FingerprintContract = CONTRACT,
    by_chapter: bool = True,
    faint: list[dict[int, int]] | None = None,
) -> tuple[list[list[Verdict]], int]:
    """:func:`_compare_batch`, and the registry's serial the verdicts were compared at. ``by_chapter``: a long
    document (a whole book) is compared part by part as well (:func:`_add_book_verdicts`). ``faint``, when
    given, receives per document the chapters that share a code with it too few to make a candidate."""
    layout = layout_for(settings)
    holders = _Holders.fetch(session, documents, owner="chapter")
    if faint is not None:
        faint[:] = [{} for _ in documents]
    candidates = [
        _rank_candidates(
            session,
            document,
            holders,
            layout,
            owner="chapter",
            contract=contract,
            faint=faint[number] if faint is not None else None,
        )
        if document.text
        else {}
        for number, document in enumerate(documents)
    ]
    chapters = load_chapters(session, (c for found in candidates for c in found))
    results: list[list[Verdict]] = []
    for number, (document, found) in enumerate(zip(documents, candidates, strict=True)):
        if not found:
            results.append([])
            continue
        skip = _common_codes(document, holders, contract)
        if ignored is not None:
            skip |= set(ignored[number])
        ignore = _ignore_mask(document, skip)
        verdicts = [
            verify(document, chapters[c], chapter_document(chapters[c].text), methods, ignore, contract)
            for c, methods in found.items()
            if c in chapters
        ]
        results.append(sorted(verdicts, key=_best_first))
    if by_chapter:
        _add_book_verdicts(session, documents, results, settings, ignored=ignored, contract=contract)
    return results, holders.serial


def _best_first(verdict: Verdict) -> tuple[bool, float, int]:
    return (not verdict.flagged, -verdict.score, verdict.chapter_id)


def _add_book_verdicts(
    session: Session,
    documents: Sequence[TextFingerprints],
    results: list[list[Verdict]],
    settings: Settings,
    *,
    ignored: Sequence[Collection[int]] | None,
    contract: FingerprintContract,
) -> None:
    """Compare each long document's parts (:func:`compare.chapters.book_segments`: its chapters, or windows)
    as documents of their own, and keep, per chapter, the better of the whole document's verdict and its
    parts' (flagged first, then the score), spans moved to the whole document's offsets.

    A whole book compared whole has its few best candidate chapters verified (the index keeps
    ``max_candidates`` of them per document); compared part by part, every chapter it holds is a candidate of
    the part that holds it. Documents shorter than :data:`compare.chapters.BOOK_MIN_CHARS` are not split."""
    owners: list[tuple[int, int]] = []  # (document, the part's start in it)
    parts: list[TextFingerprints] = []
    for number, document in enumerate(documents):
        for start, end in book_segments(document.original):
            owners.append((number, start))
            parts.append(fingerprint_text(document.original[start:end], contract))
    if not parts:
        return
    part_ignored = [ignored[number] for number, _ in owners] if ignored is not None else None
    found, _ = _compare_batch_at(
        session, parts, settings, ignored=part_ignored, contract=contract, by_chapter=False
    )
    best: dict[int, dict[int, Verdict]] = {}
    for (number, start), verdicts in zip(owners, found, strict=True):
        chosen = best.setdefault(number, {v.chapter_id: v for v in results[number]})
        for verdict in verdicts:
            spans = tuple((a + start, b + start, c, d) for a, b, c, d in verdict.spans)
            moved = replace(verdict, spans=spans)
            held = chosen.get(verdict.chapter_id)
            if held is None or _best_first(moved) < _best_first(held):
                chosen[verdict.chapter_id] = moved
    for number, chosen in best.items():
        results[number] = sorted(chosen.values(), key=_best_first)


def compare_document(
    session: Session,
    document: TextFingerprints,
    settings: Settings,
    *,
    ignored_codes: Collection[int] = (),
    contract: FingerprintContract = CONTRACT,
) -> list[Verdict]:
    """Verdicts for every candidate chapter of ``document``, best first (flagged or not). Nothing is
    stored."""
    return _compare_batch(session, [document], settings, ignored=[ignored_codes], contract=contract)[0]


def verify_chapters(
    session: Session,
    document: TextFingerprints,
    chapter_ids: Collection[int],
    *,
    ignored_codes: Collection[int] = (),
) -> dict[int, Verdict]:
    """The verdict of ``document`` against each of the given chapters (chapter id -> verdict), whether or not
    the index would rank them among its candidates: the takedown re-check asks whether a page still copies the
    chapter a match names. Hashes shared by many chapters are ignored as in :func:`compare_document`, and so
    are ``ignored_codes`` (winnowing hashes, signed: the page's site template); nothing is stored."""
    chapters = load_chapters(session, chapter_ids)
    if not document.text or not chapters:
        return {}
    holders = _Holders.fetch(session, [document], owner="chapter")
    ignore = _ignore_mask(document, _common_codes(document, holders, CONTRACT) | set(ignored_codes))
    return {
        chapter_id: verify(document, chapter, chapter_document(chapter.text), (), ignore)
        for chapter_id, chapter in chapters.items()
    }


# ------------------------------------------------------------------------------------------------- pages


@dataclass(frozen=True)
class PageOutcome:
    """What processing one page decided: the chapters it copies (flagged or licensed matches). The meaning
    path's gate (:mod:`compare.meaning_gate`) reads the rest, known here at no extra cost: ``near_misses``,
    the candidate chapters verified and not flagged, ``(chapter_id, score)`` best first, and the page's
    ``text`` (:func:`process_pages` only), and ``faint``: chapters that share codes with the page, too few
    to make them candidates (a rewrite that changed two thirds of the words may keep only that), at most
    :data:`FAINT_KEPT`, those sharing the most first; ``meaning``: the chapters of the meaning matches the
    page holds (:func:`record_matches`, from the matches it read anyway), which the gate checks again."""

    page_id: int
    url: str
    matched_chapters: tuple[int, ...]
    near_misses: tuple[tuple[int, float], ...] = ()
    text: str = field(default="", repr=False, compare=False)
    faint: tuple[int, ...] = ()
    meaning: tuple[int, ...] = ()


FAINT_KEPT = 12
"""Chapters a page's :attr:`PageOutcome.faint` keeps (as many as the candidates verified)."""


def _faintest(shared: dict[int, int]) -> tuple[int, ...]:
    return tuple(sorted(shared, key=lambda c: (-shared[c], c))[:FAINT_KEPT])


def _lock_pages(
    session: Session, page_ids: Sequence[int], *, pending_only: bool
) -> list[tuple[int, str, str]]:
    """(id, url, text) of the pages to work on, locked for this transaction on PostgreSQL.

    ``pending_only``: only pages stored and not compared yet; pages another worker holds are skipped (``SKIP
    LOCKED``), so two deliveries of one task never work on one page at once, and a page done is not done
    again."""
    rows: list[tuple[int, str, str]] = []
    for chunk in id_chunks(page_ids):
        statement = select(Page.id, Page.url, Page.text).where(Page.id.in_(chunk))
        if pending_only:
            statement = statement.where(Page.compared_at.is_(None))
        statement = statement.order_by(Page.id)
        if is_postgres(session):
            statement = statement.with_for_update(skip_locked=pending_only, of=Page)
        rows.extend((int(i), str(u), str(t or "")) for i, u, t in session.execute(statement))
    return rows


def process_pages(session: Session, page_ids: Sequence[int], settings: Settings) -> list[PageOutcome]:
    """The crawl stage for a batch of stored pages: fingerprint, index, compare, record matches.

    Pages already compared (``compared_at`` set: their content has not changed since) and pages that another
    transaction is working on are skipped; ids of pages that are gone are ignored (the caller logs them).
    Verdicts ignore the site template until the site settles (:func:`compare.templates.settle_site`).
    """
    rows = _lock_pages(session, page_ids, pending_only=True)
    if not rows:
        return []
    documents = [fingerprint_text(text, CONTRACT) for _, _, text in rows]
    # Compared before the first write: the comparison only reads the registry, and on SQLite the first write
    # takes the database's one write lock, which the crawl's page store then waits on for the whole batch.
    faint: list[dict[int, int]] = []
    verdicts, serial = _compare_batch_at(session, documents, settings, faint=faint)
    write_fingerprints(
        session,
        owner="page",
        layout=layout_for(settings),
        items=[
            FingerprintSet(page_id, document.simhash, document.index_arrays())
            for (page_id, _, _), document in zip(rows, documents, strict=True)
            if document.text
        ],
        sample_window=settings.page_sample_window,
    )
    # the pages' samples are written: from here to the commit no registration commits (hold_registry), and
    # one that committed since the compare is compared with now
    if chapter_index.hold_registry(session) != serial:
        verdicts, serial = _compare_batch_at(session, documents, settings, faint=faint)
    outcomes = record_matches(session, [(i, url) for i, url, _ in rows], verdicts, settings, fresh=True)
    outcomes = [
        replace(o, text=text, faint=_faintest(shared))
        for o, (_, _, text), shared in zip(outcomes, rows, faint, strict=True)
    ]
    _mark_compared(session, [i for i, _, _ in rows], template_masked=False, serial=serial)
    # page Simhash and near duplicates (networks), from the texts normalised above
    observe_pages(
        session,
        [i for i, _, _ in rows],
        settings,
        {i: document.text for (i, _, _), document in zip(rows, documents, strict=True)},
    )
    return outcomes


class Recomparison:
    """The texts one pass of comparing stored pages again has compared (a newly registered work's candidates,
    site by site: :func:`jobs.retroactive.index_and_recheck`), so that a text many pages serve (mirrors, one
    chapter under several URLs) is fingerprinted and compared once.

    A verdict is a function of the text, the hashes ignored on it and the registry: it is kept by the text's
    SHA-256 and the hashes ignored (a site's template, one object for all its pages), for as long as the
    registry's serial stays the one they were compared at (:attr:`serial`; a change forgets them all). Up to
    ``max_documents`` fingerprints are kept for texts compared again with other hashes ignored (about 95 KB
    each for a 6,000-character page), the most recently used."""

    def __init__(self, *, max_documents: int = 256) -> None:
        self.max_documents = max_documents
        self._documents: OrderedDict[bytes, TextFingerprints] = OrderedDict()
        self._verdicts: dict[tuple[bytes, frozenset[int]], list[Verdict]] = {}
        self._ignored: dict[frozenset[int], frozenset[int]] = {}
        self.serial: int | None = None  # the registry's serial the verdicts kept were compared at
        self.compared = 0  # (text, ignored hashes) pairs compared
        self.reused = 0  # pages given a verdict compared before

    def verdicts(
        self, session: Session, texts: Sequence[str], ignored: Sequence[frozenset[int]], settings: Settings
    ) -> list[list[Verdict]]:
        """The verdicts of each text with the matching hashes ignored, comparing only what is not known."""
        # one object per distinct set of hashes ignored: a key found by an equal set, not the same object,
        # costs a comparison of every hash (sites copied whole share their template)
        sets: dict[int, frozenset[int]] = {}
        for codes in ignored:
            if id(codes) not in sets:
                sets[id(codes)] = self._ignored.setdefault(codes, codes)
        keys = [
            (hashlib.sha256(text.encode("utf-8")).digest(), sets[id(codes)])
            for text, codes in zip(texts, ignored, strict=True)
        ]
        missing: dict[tuple[bytes, frozenset[int]], str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._verdicts:
                missing.setdefault(key, text)
        self.reused += len(keys) - len(missing)
        if missing:
            documents = [self._document(digest, text) for (digest, _), text in missing.items()]
            found, serial = _compare_batch_at(
                session, documents, settings, ignored=[codes for _, codes in missing]
            )
            if self.serial is not None and serial != self.serial:
                # the registry changed during the pass: what was kept was compared without the change
                self.forget()
                return self.verdicts(session, texts, ignored, settings)
            self.serial = serial
            self._verdicts.update(zip(missing, found, strict=True))
            self.compared += len(missing)
        return [list(self._verdicts[key]) for key in keys]

    def forget(self) -> None:
        """Drop every verdict kept (the registry changed since they were compared)."""
        self._verdicts.clear()
        self.serial = None

    def _document(self, digest: bytes, text: str) -> TextFingerprints:
        document = self._documents.pop(digest, None) or fingerprint_text(text, CONTRACT)
        self._documents[digest] = document
        while len(self._documents) > self.max_documents:
            self._documents.popitem(last=False)
        return document


def recompare_pages(
    session: Session,
    page_ids: Sequence[int],
    settings: Settings,
    *,
    ignored: Mapping[int, Collection[int]] | None = None,
    recomparison: Recomparison | None = None,
) -> list[PageOutcome]:
    """Compare already fingerprinted pages again (new works registered, their site settled).

    ``ignored``: page id -> the site-template winnowing hashes (signed) to ignore on that page; pages not in
    it are compared with nothing of their site ignored (and marked so: the next settling of their site decides
    again, :func:`compare.templates.settle_site`). ``recomparison``: what this pass has compared already (a
    text served by several pages is compared once); by default, this call's own."""
    rows = _lock_pages(session, page_ids, pending_only=False)
    if not rows:
        return []
    ignored = ignored or {}
    recomparison = recomparison if recomparison is not None else Recomparison()
    texts = [text for _, _, text in rows]
    ignored_sets = [frozenset(ignored.get(i, ())) for i, _, _ in rows]
    verdicts = recomparison.verdicts(session, texts, ignored_sets, settings)
    if chapter_index.hold_registry(session) != recomparison.serial:  # as process_pages
        recomparison.forget()
        verdicts = recomparison.verdicts(session, texts, ignored_sets, settings)
    serial = recomparison.serial
    outcomes = record_matches(session, [(i, url) for i, url, _ in rows], verdicts, settings)
    masked = {i for i, codes in ignored.items() if codes}
    _mark_compared(session, [i for i, _, _ in rows if i in masked], template_masked=True, serial=serial)
    _mark_compared(session, [i for i, _, _ in rows if i not in masked], template_masked=False, serial=serial)
    return outcomes


def _mark_compared(
    session: Session, page_ids: Sequence[int], *, template_masked: bool, serial: int | None
) -> None:
    now = utcnow()
    values = {"compared_at": now, "template_masked": template_masked, "registry_serial": serial}
    for chunk in id_chunks(page_ids):
        session.execute(update(Page).where(Page.id.in_(chunk)).values(**values))
    prune_exchanges(session, page_ids)  # a page without a match keeps no raw exchange


_MATCHES_PER_INSERT = 1000
"""New matches per INSERT of :func:`record_matches` (11 parameters each: within SQLite's 32,766)."""


def record_matches(
    session: Session,
    pages: Sequence[tuple[int, str]],
    verdicts: Sequence[Sequence[Verdict]],
    settings: Settings,
    *,
    fresh: bool = False,
) -> list[PageOutcome]:
    """Upsert the flagged verdicts of each ``(page id, url)`` as matches. A match keeps its id, its
    ``first_seen`` and a reviewer's decision across re-crawls and re-comparisons; a match found in the page's
    current text gets fresh spans and rests on that text again (:func:`storage.match_life.rest_on_page`).

    ``fresh``: the pages' texts were just fetched (new or changed: :func:`process_pages`). Then no match is
    ever dropped: a copy that still holds is observed ``present``; one that no longer holds is observed
    ``removed`` (source ``crawl``) and keeps its spans, which point into the content the crawl store kept
    (``evidence_version_id``), except a match found on a multi-page chapter's joined parts (``part_spans``),
    which one part's verdict alone cannot take down. A brand-new match gets no check: it is first due for a
    re-check soon after it was found (:func:`storage.match_life.next_due`).

    Not ``fresh`` (:func:`recompare_pages`: the same texts compared again with new works or a settled site
    template): a machine-made match that no longer holds was a false positive and is dropped, unless it has a
    history (a check, a pending or recorded takedown, a review decision or note), rests on a kept version or
    was found on joined parts (:mod:`compare.multipage` settles those)."""
    page_ids = [page_id for page_id, _ in pages]
    existing: dict[tuple[int, int], Match] = {}
    for chunk in id_chunks(page_ids):
        for row in session.scalars(select(Match).where(Match.page_id.in_(chunk))):
            existing[(row.page_id, row.chapter_id)] = row
    meaning_of: dict[int, list[int]] = defaultdict(list)  # page -> chapters of its meaning matches
    for page_id, chapter_id in sorted(key for key, m in existing.items() if m.kind is not None):
        meaning_of[page_id].append(chapter_id)
    now = utcnow()
    # every work's licensed sites read before the first new match is added: a query between two additions
    # would flush the matches added so far as an INSERT of their own, and the rollup trigger's upserts of two
    # such INSERTs, each in key order, are not in key order together, which deadlocked two workers' batches
    # (PostgreSQL's detector breaks it after deadlock_timeout, 1 s, and the task is tried again)
    licences = licensed_hosts_of(session, {v.work_id for found in verdicts for v in found if v.flagged})
    outcomes = []
    machine_made = MatchStatus.machine_made()
    held: list[int] = []  # existing matches found again in their page's current text
    found: list[dict[str, object]] = []  # new matches, inserted in one statement after the updates
    for (page_id, url), page_verdicts in zip(pages, verdicts, strict=True):
        matched = []
        for verdict in page_verdicts:
            if not verdict.flagged:
                continue
            status = (
                MatchStatus.LICENSED if is_licensed(url, licences[verdict.work_id]) else MatchStatus.FLAGGED
            )
            # the page's own verdict (compare.multipage adds the joined parts' passages)
            values = {
                "score": verdict.score,
                "methods": list(verdict.methods),
                "spans": [list(span) for span in verdict.spans],
                "part_spans": None,
                "last_seen": now,
                # an exact copy: a meaning match found earlier on this chapter (jobs.meaning) becomes it
                "kind": None,
                "alignment": None,
            }
            match: Match | None = existing.pop((page_id, verdict.chapter_id), None)
            if match is None:
                found.append(
                    {
                        "page_id": page_id,
                        "work_id": verdict.work_id,
                        "chapter_id": verdict.chapter_id,
                        "first_seen": now,
                        "status": status.value,
                        "recheck_due_at": next_due(settings, now, now),
                        **values,
                    }
                )
            else:
                held.append(match.id)
                if match.status in machine_made:
                    match.status = status  # a reviewer's decision (confirmed, dismissed) stands
                for name, value in values.items():
                    setattr(match, name, value)
            matched.append(verdict.chapter_id)
        near = tuple((v.chapter_id, v.score) for v in page_verdicts if not v.flagged)
        # the meaning matches the page still holds (one it now copies exactly was turned exact above)
        meaning = tuple(c for c in meaning_of.get(page_id, ()) if c not in matched)
        outcomes.append(PageOutcome(page_id, url, tuple(matched), near, meaning=meaning))
    # a meaning match (jobs.meaning) is not the exact compare's to observe or drop: the meaning path checks it
    existing = {key: m for key, m in existing.items() if m.kind is None}
    session.flush()
    # the new matches in one multi-row INSERT, in the order found: PostgreSQL's rollup trigger runs once per
    # statement (see the licences above); the ORM's flush did the same there (insertmanyvalues, 1,000 rows a
    # statement) and inserted one row per statement on SQLite, to read back each new id
    for start in range(0, len(found), _MATCHES_PER_INSERT):
        session.execute(insert(Match).values(found[start : start + _MATCHES_PER_INSERT]))
    rest_on_page(session, held)
    if fresh:
        observations = [Observation(i, "present", 200, "copied (crawl)", source="crawl") for i in held]
        unsettled = unsettled_pages(session, page_ids)  # read before their scripts were done: not a removal
        observations += [
            Observation(m.id, "removed", 200, "the page no longer copies the chapter (crawl)", source="crawl")
            for m in existing.values()
            if not m.part_spans and m.page_id not in unsettled
        ]
        observe(session, observations, settings, now=now)
    else:
        _drop_false_positives(session, [m for m in existing.values() if m.status in machine_made])
    session.flush()
    return outcomes


def unsettled_pages(session: Session, page_ids: Sequence[int]) -> set[int]:
    """The pages among ``page_ids`` that the browser read before their scripts were done
    (:data:`storage.match_life.UNSETTLED_NOTE`), or whose chapter images could not all be read
    (:data:`storage.match_life.IMAGES_UNREAD_NOTE`)."""
    found: set[int] = set()
    for chunk in id_chunks(page_ids):
        unread = or_(Page.note.contains(UNSETTLED_NOTE), Page.note.contains(IMAGES_UNREAD_NOTE))
        query = select(Page.id).where(Page.id.in_(chunk), unread)
        found.update(int(i) for i in session.scalars(query))
    return found


def _drop_false_positives(session: Session, matches: Sequence[Match]) -> None:
    """Delete the matches that a comparison of an unchanged text no longer finds and that nothing but that
    finding ever recorded: no check, no takedown, no review, no kept evidence, not found on joined parts."""
    candidates = [
        m.id
        for m in matches
        if m.recheck_state is None
        and m.taken_down_at is None
        and m.down_seen_at is None
        and m.evidence_version_id is None
        and not m.part_spans
    ]
    reviewed: set[int] = set()
    for chunk in id_chunks(candidates):
        reviewed.update(
            session.scalars(select(ReviewDecision.match_id).where(ReviewDecision.match_id.in_(chunk)))
        )
        reviewed.update(session.scalars(select(MatchNote.match_id).where(MatchNote.match_id.in_(chunk))))
    stale = [i for i in candidates if i not in reviewed]
    for chunk in id_chunks(stale):
        session.execute(delete(Match).where(Match.id.in_(chunk)))


# ------------------------------------------------------------------------------------------------- works


RETRO_COMMON_TEXTS = 3
"""A sampled code that more than this many distinct texts among the stored pages share with a newly registered
work *as their only shared code* is a common phrase (a formula, an idiom), not a copy's trace: those pages are
not re-compared (:func:`retro_candidates`)."""

RETRO_SITE_TEMPLATE_TEXTS = 50
"""A sampled code that more than this many distinct texts *of one site* hold is part of that site's template
(a sidebar recommending the work with its opening lines, a blurb on every page): it does not make that
site's pages candidates (:func:`retro_candidates`). A copy of a chapter is one text on a site, whatever URLs
serve it."""


def retro_candidates(
    shared: Mapping[int, np.ndarray],
    text_of: Mapping[int, str],
    site_of: Mapping[int, int | None] | None = None,
) -> list[int]:
    """The stored pages a newly registered work re-compares, from ``shared`` (page id -> the work's sampled
    codes its sample holds, :func:`storage.code_index.pages_sharing`), ``text_of`` (page id -> its text's
    identity, e.g. ``content_sha256``; mirrors of one text count once) and ``site_of`` (page id -> its site).

    First, the codes more than :data:`RETRO_SITE_TEMPLATE_TEXTS` texts of one site hold are that site's
    template and do not count for its pages: a site whose every page quotes the work in a sidebar would
    otherwise send all its pages (20,000 on a large site) to be compared again, for nothing the comparison
    keeps (it masks the template). A page copying the work holds the codes of its own chapter besides. A few
    of the site's pages stay candidates: a sample window reaching past the quote into the page's own text
    keeps a code of the quote on some pages only (held by too few texts to count as the template).

    Then a page holding two or more codes is re-compared. So is a page holding one, unless that one code is
    held, as their only one, by more than :data:`RETRO_COMMON_TEXTS` distinct texts. Why: a copy of any
    length holds one code per ``page_sample_window`` k-grams it keeps, so its pages hold many (every copy of
    a 1.15M-character work's chapters held 11 or more, ``benchmarks/scale.py``), and a copy noised down to
    one code (``css_external_noise`` of ``benchmarks/piracy_eval.py``) holds one no other text holds alone.
    Unrelated pages that share one short phrase with the work all share the *same* few codes: at 12,000
    stored pages they were 485 of 765 candidates, each an exact re-compare for nothing; asking two codes of
    every page instead lost the noised copy."""
    held_by = {page_id: set(np.asarray(codes).tolist()) for page_id, codes in shared.items()}
    if site_of:
        texts: dict[tuple[int, int], set[str]] = defaultdict(set)
        for page_id, codes in held_by.items():
            site = site_of.get(page_id)
            if site is not None:
                for code in codes:
                    texts[site, code].add(text_of.get(page_id, str(page_id)))
        template: dict[int, set[int]] = defaultdict(set)
        for (site, code), holders in texts.items():
            if len(holders) > RETRO_SITE_TEMPLATE_TEXTS:
                template[site].add(code)
        for page_id, codes in held_by.items():
            site = site_of.get(page_id)
            if site is not None and site in template:
                codes -= template[site]
    alone: dict[int, set[str]] = defaultdict(set)
    for page_id, codes in held_by.items():
        if len(codes) == 1:
            alone[next(iter(codes))].add(text_of.get(page_id, str(page_id)))
    return sorted(
        page_id
        for page_id, codes in held_by.items()
        if len(codes) >= 2 or (len(codes) == 1 and len(alone[next(iter(codes))]) <= RETRO_COMMON_TEXTS)
    )


ChapterDocuments = list[tuple[int, TextFingerprints]]
"""A work's chapters as (chapter id, fingerprints), as :func:`fingerprint_work` wrote them."""


def fingerprint_work(session: Session, work_id: int, settings: Settings) -> ChapterDocuments:
    """Fingerprint and index every chapter of a work: one write for all chapters (binary ``COPY`` on
    PostgreSQL); returns the chapters' fingerprints, for :func:`index_work`. Its commit is when the work
    becomes visible to the pages compared from then on (the registry's serial moves); commit it before
    :func:`index_work` looks up the pages stored before, so that the registry is not held while it does (see
    docs/compare.md, "Registering while pages are compared")."""
    if session.get(Work, work_id) is None:
        raise LookupError(f"no work with id {work_id}")
    documents = _documents_of(session, work_id)
    write_fingerprints(
        session,
        owner="chapter",
        layout=layout_for(settings),
        items=[FingerprintSet(i, document.simhash, document.index_arrays()) for i, document in documents],
    )
    from fptrack.compare.entities import index_chapters  # the meaning path's candidates (issue 36)

    index_chapters(session, work_id)
    return documents


def _documents_of(session: Session, work_id: int) -> ChapterDocuments:
    chapters = session.execute(select(Chapter.id, Chapter.text).where(Chapter.work_id == work_id)).all()
    return [(int(chapter_id), chapter_document(text)) for chapter_id, text in chapters]


def index_work(
    session: Session, work_id: int, settings: Settings, *, fingerprinted: ChapterDocuments | None = None
) -> list[int]:
    """Fingerprint and index every chapter of a work (:func:`fingerprint_work`, unless ``fingerprinted``: what
    it returned, written and committed already); returns the ids of already-crawled pages that may copy it
    (retroactive detection re-compares those pages exactly, from their text: :func:`recompare_pages`).

    One page-side look-up for the whole work: the work's own sample
    (:func:`storage.fingerprints.page_sample` of every chapter, at the smallest window a stored page was
    sampled at) against the pages' samples (:func:`storage.code_index.pages_sharing`), then
    :func:`retro_candidates`. A passage of ``W + k - 1`` characters (71 at the default window W = 64) that a
    page shares with a chapter has one minimum over its W k-grams, kept by both samples: it is always found,
    with a quarter of the look-ups of the chapter's every code. A page not yet stored when the look-up reads
    compares with the work itself (:func:`process_pages` checks the registry before it commits).
    """
    if fingerprinted is None:
        documents = fingerprint_work(session, work_id, settings)
    elif session.get(Work, work_id) is None:
        raise LookupError(f"no work with id {work_id}")
    else:
        documents = fingerprinted
    layout = layout_for(settings)
    window = session.scalar(select(func.min(PageCodes.sample_window)))
    if window is None:
        return []  # no page fingerprinted yet: nothing to look up (a new deployment registering its works)
    samples = [
        page_sample(array, int(window))
        for _, document in documents
        for array in document.index_arrays().values()
    ]
    shared = pages_sharing(session, np.unique(np.concatenate(samples)).tolist() if samples else [])
    text_of, site_of = _texts_and_sites(session, list(shared))
    pages = set(retro_candidates(shared, text_of, site_of))
    if CONTRACT.uses("simhash"):
        for _, document in documents:
            if document.simhash is not None:
                hits = simhash_candidates(session, document.simhash, layout, owner="page")
                pages.update(hit.owner_id for hit in hits)
    return sorted(pages)


def _texts_and_sites(
    session: Session, page_ids: Sequence[int]
) -> tuple[dict[int, str], dict[int, int | None]]:
    """(page id -> its text's hash, page id -> its site) of ``page_ids``."""
    texts: dict[int, str] = {}
    sites: dict[int, int | None] = {}
    for chunk in id_chunks(page_ids):
        for page_id, digest, site_id in session.execute(
            select(Page.id, Page.content_sha256, Page.site_id).where(Page.id.in_(chunk))
        ):
            # a page stored without a hash of its text (written by hand, before hashes) is a text of its own
            texts[int(page_id)] = str(digest) if digest else f"page {page_id}"
            sites[int(page_id)] = None if site_id is None else int(site_id)
    return texts, sites
