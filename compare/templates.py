"""Site templates: text a site repeats on many of its pages is never evidence of copying, decided once the
site's crawl has settled, from all its pages.

Navigation, ads, disclaimers and slogans that a site puts on every page are *template*. A winnowing hash
(``fingerprint.contract.CONTRACT.winnow_chars``) is a template hash of a site when pages of at least
:data:`SITE_MIN_TEXTS` different texts of that site hold it. Pages are versions of one text when they share
more than :data:`DUPLICATE_SHARE` of the larger one's distinct hashes: real pirate sites host one chapter
under several URLs (desktop, mobile, print), and those are copies, never template. Both pages must be mostly
that text: a short page (a chapter of a few hundred characters) is not a version of every longer page that
quotes it.

The verdicts of a page are first decided without its site's template (:func:`compare.service.process_pages`),
then :func:`settle_site`, run once the crawl has stored and compared every page, decides the template from the
whole site and compares again, ignoring it, the pages whose matches could rest on it: those holding a template
hash that some registered chapter also holds (a template quoting a registered work). So the final matches are
a function of the set of pages, never of the order in which they were fetched or processed, or of how many
workers did it. :func:`site_template_codes` is the pure part (property-tested for order independence)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.compare.multipage import settle_chains
from fptrack.compare.service import Recomparison, recompare_pages
from fptrack.core.settings import Settings
from fptrack.fingerprint.contract import CONTRACT
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.storage.chunks import id_chunks
from fptrack.storage.code_index import code_holders
from fptrack.storage.fingerprints import TEMPLATE_KEY_SHIFT, TEMPLATE_KIND, load_page_codes, template_keys
from fptrack.storage.index import to_signed64
from fptrack.storage.models import Match, Page, Site, utcnow

__all__ = [
    "DUPLICATE_SHARE",
    "SITE_MIN_TEXTS",
    "SettledSite",
    "settle_pages",
    "settle_site",
    "site_template",
    "site_template_codes",
]

SITE_MIN_TEXTS = 6
"""A hash is template when pages of at least this many different texts of one site hold it (the page itself
and five others)."""
DUPLICATE_SHARE = 0.5
_KIND = TEMPLATE_KIND


def site_template_codes(
    code_sets: Mapping[str, np.ndarray],
    *,
    min_texts: int = SITE_MIN_TEXTS,
    duplicate_share: float = DUPLICATE_SHARE,
) -> set[int]:
    """The template hashes of a site whose pages (URL -> its winnowing hashes) are ``code_sets``.

    A hash is template when its holders include ``min_texts`` pages no two of which are versions of one text
    (sharing more than ``duplicate_share`` of the larger page's distinct hashes). Holders are visited in URL
    order and grouped greedily, so the answer depends on the pages alone, never on the order they are given
    in."""
    urls = sorted(code_sets)
    sets = [_distinct(np.asarray(code_sets[url], dtype=np.int64)) for url in urls]
    if len(sets) < min_texts:
        return set()
    codes, owners = _by_code(sets)
    # each distinct code's run in the sorted codes: where it starts, how long it is
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1]))) if len(codes) else codes
    counts = np.diff(np.append(starts, len(codes)))
    unique = codes[starts]
    frequent = np.flatnonzero(counts >= min_texts)

    same_text: dict[tuple[int, int], bool] = {}

    def versions_of_one_text(a: int, b: int) -> bool:
        key = (a, b) if a < b else (b, a)
        if key not in same_text:
            shared = np.intersect1d(sets[a], sets[b], assume_unique=True).size
            same_text[key] = shared > duplicate_share * max(len(sets[a]), len(sets[b]))
        return same_text[key]

    decided: dict[bytes, bool] = {}
    template: set[int] = set()
    for index in frequent.tolist():
        holders = owners[starts[index] : starts[index] + counts[index]]
        signature = holders.tobytes()
        if signature not in decided:
            texts: list[int] = []
            for holder in holders.tolist():
                if not any(versions_of_one_text(holder, other) for other in texts):
                    texts.append(holder)
                    if len(texts) >= min_texts:
                        break
            decided[signature] = len(texts) >= min_texts
        if decided[signature]:
            template.add(int(unique[index]))
    return template


def _by_code(sets: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every code of ``sets`` sorted, and beside each the index of the set holding it: a code's holders in
    ascending order (the order of ``sets``).

    Template keys are 32-bit: a key and its holder fit in one 64-bit number, key above, and one sort of those
    (numpy's vectorised sort) gives both orders at once, ~10x faster than the stable argsort and the two
    gathers it replaces (the settling of a 5,000-page site sorts ~5 million). Wider codes take the argsort."""
    codes = np.concatenate(sets) if sets else np.empty(0, dtype=np.int64)
    owners = np.repeat(np.arange(len(sets), dtype=np.int64), [len(s) for s in sets])
    if len(codes) and codes.min() >= -(1 << 31) and codes.max() < (1 << 31) and len(sets) < (1 << 32):
        combined = (codes << 32) | owners
        combined.sort()
        return combined >> 32, combined & 0xFFFFFFFF
    order = np.argsort(codes, kind="stable")  # stable: holders of a code stay in the order of ``sets``
    return codes[order], owners[order]


def _held(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``np.isin(values, wanted)`` for ``wanted`` sorted and distinct: a binary search of each value among
    the few wanted instead of sorting every value with them."""
    if not len(wanted):
        return np.zeros(len(values), dtype=bool)
    found = np.minimum(np.searchsorted(wanted, values), len(wanted) - 1)
    held: np.ndarray = wanted[found] == values
    return held


def _distinct(codes: np.ndarray) -> np.ndarray:
    """``codes`` sorted and distinct: as they are when they are already (a page's stored template keys)."""
    if len(codes) < 2 or bool((codes[1:] > codes[:-1]).all()):
        return codes
    return np.unique(codes)


@dataclass(frozen=True)
class SettledSite:
    """What settling a site found and did."""

    site_id: int
    pages: int
    template_codes: int
    # template hashes that registered chapters hold too (settle_pages: of those the pages it compares hold)
    quoting_codes: int
    recompared: int
    masked: int
    chains: int = 0  # chapters split over pages, compared joined


def settle_site(
    session: Session, site_id: int, settings: Settings, *, recomparison: Recomparison | None = None
) -> SettledSite:
    """Decide the site's template from all its fingerprinted pages and compare again, ignoring it, the pages
    whose matches could rest on a template quoting a registered work (and, without it, pages that ignored an
    earlier template the site no longer has). Idempotent: settling again with the same pages changes
    nothing. The template is kept with the site (``sites.template_codes``) for :func:`settle_pages`."""
    rows, codes, template = _site_template(session, site_id)
    quoting = _quoting(session, template)
    was_masked = {int(page_id) for page_id, _, masked in rows if masked}
    affected: list[int] = []
    if quoting:
        holding = _pages_holding_any(codes, template_keys(np.array(sorted(quoting), dtype=np.int64)))
        # ignoring text only ever removes evidence: a page with no match cannot gain one, unless it lost it to
        # an earlier template
        affected = sorted(set(holding) & (_pages_with_matches(session, holding) | was_masked))
    previously = sorted(was_masked - set(affected))
    if _stored_template(session, site_id) == template:
        # the template has not changed since the site last settled: a page masked then was compared ignoring
        # this very template and has kept its text since (a changed text is stored unmasked,
        # crawler.store.PageStore), so comparing it again would give its verdicts back. A re-crawl that
        # changed a few pages of a 20,000-page site compares those, not the site's every copy again.
        affected = [page_id for page_id in affected if page_id not in was_masked]
    frozen = frozenset(template)
    _recompare(session, affected, settings, frozen, recomparison)
    _recompare(session, previously, settings, None, recomparison)
    # chapters split over pages, compared joined: after the pages' own verdicts, which they add to
    # (compare.multipage)
    chains = settle_chains(session, site_id, settings, template=frozen)
    session.execute(
        update(Site)
        .where(Site.id == site_id)
        .values(settled_at=utcnow(), template_codes=np.array(sorted(template), dtype="<i8").tobytes())
    )
    return SettledSite(
        site_id,
        len(rows),
        len(template),
        len(quoting),
        len(affected) + len(previously),
        len(affected),
        chains,
    )


def settle_pages(
    session: Session,
    site_id: int,
    page_ids: Sequence[int],
    settings: Settings,
    *,
    recomparison: Recomparison | None = None,
) -> SettledSite:
    """Compare again some pages of a settled site, as :func:`settle_site` would leave them, without settling
    the whole site: what a newly registered work does with the stored pages that may copy it.

    The site's pages have not changed since it settled, so neither has its template: the stored one is used,
    and only ``page_ids`` are compared again (those holding a template hash that a registered chapter holds,
    the new work's included, with the template ignored; the others without). Pages outside ``page_ids`` keep
    their verdicts: the new work's chapters are not among their candidates (or they would be in
    ``page_ids``), and masking template text only ever removes evidence of the works they match. Multi-page
    chapters are compared again joined (they may copy the new work). A site never settled with a stored
    template, or with pages compared since, is settled whole (:func:`settle_site`) after its pages are
    compared."""
    stored = _settled_template(session, site_id)
    if stored is None:
        _recompare(session, page_ids, settings, None, recomparison)
        return settle_site(session, site_id, settings, recomparison=recomparison)
    codes = load_page_codes(session, page_ids) if stored else {}
    template = np.array(sorted(stored), dtype=np.int64)
    # a page holds a quote when it holds a template hash a registered chapter holds: only the hashes these
    # pages hold are looked up among the chapters (a site's template may hold thousands; a few pages, few)
    held = np.unique(np.concatenate(list(codes.values()))) if codes else np.empty(0, dtype=np.int64)
    quoting = _quoting(session, template[np.isin(template >> TEMPLATE_KEY_SHIFT, held)].tolist())
    holding: set[int] = set()
    if quoting:
        holding = set(_pages_holding_any(codes, template_keys(np.array(sorted(quoting), dtype=np.int64))))
    frozen = frozenset(stored)
    _recompare(session, [p for p in page_ids if p in holding], settings, frozen, recomparison)
    _recompare(session, [p for p in page_ids if p not in holding], settings, None, recomparison)
    chains = settle_chains(session, site_id, settings, template=frozen, unchanged=True)
    session.execute(update(Site).where(Site.id == site_id).values(settled_at=utcnow()))
    return SettledSite(site_id, len(page_ids), len(stored), len(quoting), len(page_ids), len(holding), chains)


def site_template(session: Session, site_id: int) -> frozenset[int]:
    """The site's template as its pages stored now decide it (the winnowing hashes, signed,
    :func:`settle_site` ignores): what the takedown re-check of a page compared without its template ignores
    too. The stored one when no page was compared since the site settled."""
    stored = _settled_template(session, site_id)
    if stored is not None:
        return frozenset(stored)
    return frozenset(_site_template(session, site_id)[2])


_RECOMPARE_CHUNK = 64


def _recompare(
    session: Session,
    page_ids: Sequence[int],
    settings: Settings,
    template: frozenset[int] | None,
    recomparison: Recomparison | None = None,
) -> None:
    recomparison = recomparison if recomparison is not None else Recomparison()
    for start in range(0, len(page_ids), _RECOMPARE_CHUNK):
        chunk = page_ids[start : start + _RECOMPARE_CHUNK]
        ignored = {page_id: template for page_id in chunk} if template is not None else None
        recompare_pages(session, chunk, settings, ignored=ignored, recomparison=recomparison)


def _quoting(session: Session, template: Collection[int]) -> set[int]:
    """The template hashes that registered chapters hold too (a template quoting a registered work)."""
    return set(code_holders(session, _KIND, template, owner="chapter")) if template else set()


def _stored_template(session: Session, site_id: int) -> set[int] | None:
    """The template stored at the site's last settling (``None``: never settled with one), whether or not it
    still stands."""
    return _last_settling(session, site_id)[1]


def _settled_template(session: Session, site_id: int) -> set[int] | None:
    """The template stored at the site's last settling, if it still stands: no page of the site compared
    since (a page compared later may change it, and marks the site for settling again)."""
    settled_at, stored = _last_settling(session, site_id)
    if stored is None:
        return None
    changed = session.scalar(
        select(Page.id).where(Page.site_id == site_id, Page.compared_at > settled_at).limit(1)
    )
    return None if changed is not None else stored


def _last_settling(session: Session, site_id: int) -> tuple[datetime | None, set[int] | None]:
    """When the site last settled and the template it stored then (``None``, ``None``: never settled)."""
    settled_at, stored = session.execute(
        select(Site.settled_at, Site.template_codes).where(Site.id == site_id)
    ).one_or_none() or (None, None)
    if settled_at is None or stored is None:
        return settled_at, None
    return settled_at, set(np.frombuffer(bytes(stored), dtype="<i8").tolist())


def _site_template(
    session: Session, site_id: int
) -> tuple[list[tuple[int, str, bool]], dict[int, np.ndarray], set[int]]:
    """(id, url, template_masked) of the site's fingerprinted pages, their template keys, and the template
    (winnowing hashes, signed)."""
    rows = [
        (int(page_id), str(url), bool(masked))
        for page_id, url, masked in session.execute(
            select(Page.id, Page.url, Page.template_masked).where(
                Page.site_id == site_id, Page.fingerprinted_at.is_not(None)
            )
        )
    ]
    # each page's template keys, as ``page_codes`` keeps them for this (positions are not needed: a template
    # is a set of hashes)
    codes = load_page_codes(session, [page_id for page_id, _, _ in rows])
    urls = {page_id: url for page_id, url, _ in rows}
    keys = site_template_codes({url: codes[page_id] for page_id, url, _ in rows if page_id in codes})
    return rows, codes, _template_hashes(session, keys, codes, urls)


def _template_hashes(
    session: Session, keys: set[int], codes: Mapping[int, np.ndarray], urls: Mapping[int, str]
) -> set[int]:
    """The winnowing hashes (signed 64-bit) whose template keys are ``keys``, read off the texts of pages
    holding them (a template is on many pages: one or two pages' texts usually hold every key).

    Pages are taken by the number of keys they hold, then by URL, so the answer is a function of the site's
    pages, never of the order they were stored in; every hash of a taken page whose key is a template key
    counts (two hashes sharing a key, which one site shows about once per 4 billion pairs, are both
    template)."""
    if not keys:
        return set()
    wanted = np.array(sorted(keys), dtype=np.int64)
    pages = [page_id for page_id in codes if page_id in urls]
    held = dict(zip(pages, _keys_held(codes, pages, wanted).tolist(), strict=True))
    order = sorted((page_id for page_id, count in held.items() if count), key=lambda p: (-held[p], urls[p]))
    remaining = set(keys)
    hashes: set[int] = set()
    for page_id in order:
        if not remaining:
            break
        if remaining.isdisjoint(codes[page_id].tolist()):
            continue
        text = session.scalar(select(Page.text).where(Page.id == page_id)) or ""
        for code, _ in fingerprint_text(text, CONTRACT).winnow_chars:
            signed = to_signed64(code)
            if signed >> TEMPLATE_KEY_SHIFT in keys:
                hashes.add(signed)
                remaining.discard(signed >> TEMPLATE_KEY_SHIFT)
    return hashes


def _pages_holding_any(codes: dict[int, np.ndarray], wanted: np.ndarray) -> list[int]:
    """The pages (sorted ids) among ``codes`` (page id -> its winnowing hashes) holding any of ``wanted``.

    One ``isin`` over every page's codes at once: a call per page cost about a millisecond each, minutes for
    the 20,000-page sites a newly registered work's copies sit on (``benchmarks.scale.pages``, 100,000
    pages)."""
    if not codes or not len(wanted):
        return []
    pages = sorted(codes)
    counts = _keys_held(codes, pages, np.unique(wanted)).tolist()
    return [page_id for page_id, count in zip(pages, counts, strict=True) if count]


def _keys_held(codes: Mapping[int, np.ndarray], pages: Sequence[int], wanted: np.ndarray) -> np.ndarray:
    """How many codes of ``wanted`` (sorted, distinct) each of ``pages`` holds among its ``codes``: one
    look-up over every page's codes at once."""
    arrays = [codes[page_id] for page_id in pages]
    flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(pages)), [len(array) for array in arrays])
    counts: np.ndarray = np.bincount(owner[_held(flat, wanted)], minlength=len(pages))
    return counts


def _pages_with_matches(session: Session, page_ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for chunk in id_chunks(page_ids):
        found.update(session.scalars(select(Match.page_id).where(Match.page_id.in_(chunk)).distinct()))
    return found
