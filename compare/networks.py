"""Pirate networks: sites that serve the same texts, found from near-duplicate pages as they arrive.

Web fiction is pirated by networks of clone sites (笔趣阁-style mirrors) that take their chapters from one
content source and serve them under different templates and ads. A page of such a site is a near duplicate of
the same chapter on its sister sites; across networks the same chapter usually differs more, because every
source has its own variant of the text (its typos, its inserted "remember our address" lines, its chapter
cuts). This module gives the seeds' near-duplicate machinery that job:

1. **Page Simhash** (:func:`observe_pages`, called at the end of ``compare.service.process_pages``): the
   64-bit ``tf`` Simhash of a page's normalised main text, the variant docs/fingerprints.md measured best on
   edited copies (``tf`` beats ``tfidf``, ``entropy`` and ``termlen``; E-Simhash's ``position`` loses
   everything under insertions) and on pages re-hosted under other templates (precision 0.97 / recall 0.94
   at Hamming <= 3, ``benchmarks/mirror_similarity.py``). It is stored as the layout's Simhash row of the page
   in ``fingerprints`` (the permuted-prefix expression indexes and the hot buckets of
   :mod:`storage.simhash_index` serve it), after the page's other fingerprints were written.
2. **Near duplicates on other sites**: the page's Simhash looked up (Hamming <= k, at most
   :data:`LOOKUP_FACTOR` x ``network_max_pairs`` stored pages, the nearest; the batch's pages in one
   statement, :func:`storage.simhash_index.simhash_neighbours`); of the hits on other sites, one page per site
   (``network_pairs_per_site``) and ``network_max_pairs`` in all (:func:`pick_near_duplicates`) become
   ``near_duplicates`` rows (the page already stored had the text first), each adding one to the
   ``site_pairs`` evidence of its two sites. Incremental and bounded: each page costs one index look-up and
   a few row writes however many times its chapter is stored (a chapter on 500 pages once cost a row per
   copy and a read of every pair of every copy: ``benchmarks.scale.networks``).
3. **Networks** (:func:`find_networks`): connected components of the site pairs that share at least
   ``network_min_shared`` *close* pages (Hamming <= :data:`CLOSE_DISTANCE`) and at least
   ``network_min_share`` of the smaller site's Simhashed pages; sites licensed for a work are never members
   (they carry the texts legitimately). Both conditions keep apart two networks that pirate the same novel
   from different sources: their variants of a chapter fall within k bits of each other up to a third of the
   time (enough for a site pair to pass any count), within two bits rarely, while a clone of the same source
   is within two bits on most chapters (``benchmarks.accuracy.discovery`` sweeps the distance and the share,
   and measures MinHash LSH over the sites' sets of Simhash keys as the alternative).

Each network reports its sites, the likely source (the site whose copy was there first most often), the
works copied on its sites, the copies and how many were taken down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.compare.licensing import normalise_site
from fptrack.core.settings import Settings
from fptrack.fingerprint.contract import CONTRACT
from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.simhash import simhash_text
from fptrack.storage.chunks import id_chunks
from fptrack.storage.fingerprints import is_postgres
from fptrack.storage.hot_buckets import file_in_hot_buckets
from fptrack.storage.index import IndexLayout, to_signed64
from fptrack.storage.models import (
    Fingerprint,
    LicensedSite,
    Match,
    MatchStatus,
    NearDuplicate,
    Page,
    Site,
    SitePair,
    Work,
    as_utc,
    iso_utc,
    utcnow,
)
from fptrack.storage.simhash_index import simhash_neighbours

__all__ = [
    "CLOSE_DISTANCE",
    "LOOKUP_FACTOR",
    "MIN_PAGE_CHARS",
    "Network",
    "NetworkSite",
    "ObservedPages",
    "find_networks",
    "network_layout",
    "observe_pages",
    "page_simhash",
    "pick_near_duplicates",
]

CLOSE_DISTANCE = 2
"""Near duplicates at most this many bits apart are *close*: the same source's text under another template
and other ads. On ``benchmarks.accuracy.discovery``'s web, 53-100 % of the pairs of one network's pages of a
chapter are close, against at most 16 % of the pairs of the same chapter on two networks (whose sources are
different e-texts of the novel with their own typos); within k = 3 bits the latter reach 36 %. Networks are
made of close pairs; the wider Hamming <= k finds the near duplicates themselves (a mirror, a copy in
another network)."""
LOOKUP_FACTOR = 4
"""The near-duplicate look-up of a page reads at most this many times ``FPTRACK_NETWORK_MAX_PAIRS`` stored
pages, the nearest, then those stored first: room for the copies on the page's own site and several on one
other site before :func:`pick_near_duplicates` chooses, while a chapter stored on hundreds of pages costs a
look-up no larger than one stored on fifty."""
MIN_PAGE_CHARS = 200
"""Pages whose normalised text is shorter get no page Simhash: index pages, error pages and "chapter not
found" stubs look alike on every site and would link unrelated sites."""
# the pages of a pair of sites that count as one network: at least this many shared pages, and at least this
# share of the smaller site's Simhashed pages (settings override both)
COPY_STATUSES = (MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value)
_PAIR_CHUNK = 500  # page pairs per read of known pairs, site pairs per upsert (2 and 8 bound parameters each)


def network_layout(settings: Settings) -> IndexLayout:
    """The permuted-prefix layout the page Simhashes are stored and looked up under (``FPTRACK_SIMHASH_K``,
    ``FPTRACK_SIMHASH_BLOCKS``)."""
    return IndexLayout(64, settings.simhash_k, settings.simhash_blocks)


def page_simhash(text: str) -> int | None:
    """The page Simhash of a page's text (unsigned 64-bit), or None for a text too short to say anything
    (:data:`MIN_PAGE_CHARS` normalised characters)."""
    return normalized_page_simhash(normalize(text).text)


def normalized_page_simhash(normalized: str) -> int | None:
    """:func:`page_simhash` of a text already normalised (``fingerprint.normalize``)."""
    if len(normalized) < MIN_PAGE_CHARS:
        return None
    return simhash_text(normalized, params=CONTRACT.simhash)


@dataclass(frozen=True)
class ObservedPages:
    """What :func:`observe_pages` did: Simhashes written, new near-duplicate page pairs, site pairs
    touched."""

    simhashes: int = 0
    near_duplicates: int = 0
    site_pairs: int = 0


def observe_pages(
    session: Session,
    page_ids: Sequence[int],
    settings: Settings,
    normalized: Mapping[int, str] | None = None,
) -> ObservedPages:
    """Write the page Simhash of each page and record its near duplicates on other sites (module docstring).

    ``normalized``: the pages' normalised texts when the caller has them (``compare.service.process_pages``
    has just fingerprinted them), so that they are neither read back nor normalised a second time.

    Each page records at most ``settings.network_pairs_per_site`` near duplicates per other site and
    ``settings.network_max_pairs`` in all (:func:`pick_near_duplicates`): a chapter copied on hundreds of
    pages would otherwise add a row per stored copy to every new copy, and the networks need evidence that
    two sites share texts, not every pair of copies.

    Idempotent: a page observed again replaces its Simhash row; a pair of pages is counted once, whichever
    of the two arrived last. Listing pages and pages without a site are skipped."""
    if not settings.networks or not page_ids:
        return ObservedPages()
    layout = network_layout(settings)
    pages: dict[int, tuple[int, int]] = {}  # page id -> (site id, unsigned Simhash)
    for chunk in id_chunks(page_ids):
        session.execute(
            delete(Fingerprint).where(Fingerprint.page_id.in_(chunk), Fingerprint.kind == layout.kind)
        )
        read: list[tuple[int, int | None, bool, str]] = (
            [
                (int(i), site, bool(listing), normalize(text or "").text)
                for i, site, listing, text in session.execute(
                    select(Page.id, Page.site_id, Page.listing, Page.text).where(Page.id.in_(chunk))
                )
            ]
            if normalized is None
            else [
                (int(i), site, bool(listing), normalized.get(int(i), ""))
                for i, site, listing in session.execute(
                    select(Page.id, Page.site_id, Page.listing).where(Page.id.in_(chunk))
                )
            ]
        )
        for page_id, site_id, listing, text in read:
            value = None if listing or site_id is None else normalized_page_simhash(text)
            if value is not None and site_id is not None:
                pages[page_id] = (site_id, value)
    if not pages:
        return ObservedPages()
    rows: list[dict[str, Any]] = [
        {
            "page_id": page_id,
            "kind": layout.kind,
            "value": to_signed64(value),
            "payload": None,
            "created_at": utcnow(),
        }
        for page_id, (_, value) in sorted(pages.items())
    ]
    # ids matched to the rows by page (one Simhash row a page), not by the order of the rows: asked to keep
    # that order, SQLAlchemy inserts one row per statement on SQLite (a thousand statements a thousand pages)
    inserted = session.execute(insert(Fingerprint).returning(Fingerprint.page_id, Fingerprint.id), rows)
    ids: dict[int | None, int] = {page_id: fingerprint_id for page_id, fingerprint_id in inserted}
    file_in_hot_buckets(session, layout, [(int(ids[row["page_id"]]), int(row["value"])) for row in rows])

    found: dict[int, list[tuple[int, int]]] = {}  # page id -> [(other page id, distance)], nearest first
    queries = [(page_id, value) for page_id, (_, value) in sorted(pages.items())]
    limit = LOOKUP_FACTOR * settings.network_max_pairs
    for (page_id, _), hits in zip(
        queries, simhash_neighbours(session, queries, layout, owner="page", limit=limit), strict=True
    ):
        if hits:
            found[page_id] = [(hit.owner_id, hit.distance) for hit in hits]
    if not found:
        return ObservedPages(simhashes=len(pages))
    site_of_page: dict[int, int | None] = {page_id: site_id for page_id, (site_id, _) in pages.items()}
    missing = {other for near in found.values() for other, _ in near} - site_of_page.keys()
    for chunk in id_chunks(missing):
        owners = session.execute(select(Page.id, Page.site_id).where(Page.id.in_(chunk)))
        site_of_page.update({int(page_id): site_id for page_id, site_id in owners})

    pairs: dict[tuple[int, int], int] = {}  # (page, earlier page) -> distance
    for page_id, near in found.items():
        site = pages[page_id][0]
        picked = pick_near_duplicates(
            [(other, site_of_page.get(other), distance) for other, distance in near],
            site,
            per_site=settings.network_pairs_per_site,
            limit=settings.network_max_pairs,
        )
        for other, distance in picked:
            # the page stored before this batch had the text first; inside one batch, the older page id
            later, earlier = (page_id, other) if other not in pages or other < page_id else (other, page_id)
            pairs.setdefault((later, earlier), distance)
    new_pairs = _insert_new_pairs(session, pairs)
    evidence: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for later, earlier in new_pairs:
        first, second = site_of_page[earlier], site_of_page[later]
        assert first is not None and second is not None
        key = (min(first, second), max(first, second))
        evidence[key][0] += 1
        evidence[key][1 if first == key[0] else 2] += 1
        evidence[key][3] += pairs[(later, earlier)] <= CLOSE_DISTANCE
    _add_site_evidence(session, evidence)
    return ObservedPages(simhashes=len(pages), near_duplicates=len(new_pairs), site_pairs=len(evidence))


def pick_near_duplicates(
    hits: Iterable[tuple[int, int | None, int]], site: int, *, per_site: int, limit: int
) -> list[tuple[int, int]]:
    """The near duplicates a page of ``site`` records, from its look-up's ``(page id, site id, distance)``
    hits: ``(page id, distance)`` of at most ``per_site`` pages of each other site and ``limit`` in all.

    Close pages (:data:`CLOSE_DISTANCE`, what makes networks) before the merely near; then by site id, so
    that the pages of one site keep picking the same sister sites: among the many clones that hold a chapter,
    a pair of sites then collects its evidence on most of their shared chapters, as the share condition of
    :func:`linked_pairs` asks, instead of a different few sisters per chapter. Within a site the nearest page,
    then the lowest id (the one stored first). Pages of the same site, or of none, are never picked. A pure
    function of the hits (their order does not matter), so every run mode records the same pairs from the
    same store."""
    ordered = sorted(
        (
            (distance > CLOSE_DISTANCE, other_site, distance, page)
            for page, other_site, distance in hits
            if other_site is not None and other_site != site
        ),
    )
    per: dict[int, int] = defaultdict(int)
    picked: list[tuple[int, int]] = []
    for _, other_site, distance, page in ordered:
        if len(picked) >= limit:
            break
        if per[other_site] < per_site:
            per[other_site] += 1
            picked.append((page, distance))
    return picked


def _insert_new_pairs(session: Session, pairs: dict[tuple[int, int], int]) -> list[tuple[int, int]]:
    """Insert the page pairs not recorded yet (in either order); returns those inserted.

    The pairs already known are read by their two ids (both orders), not as every pair of the pages
    involved: the page stored first of a much-copied chapter is the earlier page of a pair with each later
    copy, and reading all of its pairs would grow with the copies."""
    if not pairs:
        return []
    wanted = sorted({p for later, earlier in pairs for p in ((later, earlier), (earlier, later))})
    known: set[frozenset[int]] = set()
    for start in range(0, len(wanted), _PAIR_CHUNK):
        chunk = wanted[start : start + _PAIR_CHUNK]
        known.update(
            frozenset(pair)
            for pair in session.execute(
                select(NearDuplicate.page_id, NearDuplicate.earlier_page_id).where(
                    tuple_(NearDuplicate.page_id, NearDuplicate.earlier_page_id).in_(chunk)
                )
            )
        )
    fresh: list[tuple[int, int]] = []
    for later, earlier in sorted(pairs):
        key = frozenset((later, earlier))
        if key not in known:
            known.add(key)
            fresh.append((later, earlier))
    if not fresh:
        return []
    now = utcnow()
    statement = (pg_insert if is_postgres(session) else sqlite_insert)(NearDuplicate).on_conflict_do_nothing()
    inserted = session.execute(
        statement.returning(NearDuplicate.page_id, NearDuplicate.earlier_page_id),
        [{"page_id": a, "earlier_page_id": b, "distance": pairs[(a, b)], "found_at": now} for a, b in fresh],
    )
    return [(int(a), int(b)) for a, b in inserted]


def _add_site_evidence(session: Session, evidence: dict[tuple[int, int], list[int]]) -> None:
    """Add counts to ``site_pairs`` in one multi-row upsert (concurrent workers add, never overwrite; the
    rows in site order, so that two workers lock shared rows in the same order)."""
    if not evidence:
        return
    now = utcnow()
    insert_ = pg_insert if is_postgres(session) else sqlite_insert
    rows = [
        {
            "site_a": a,
            "site_b": b,
            "shared_pages": shared,
            "close_pages": close,
            "a_first": a_first,
            "b_first": b_first,
            "first_seen": now,
            "updated_at": now,
        }
        for (a, b), (shared, a_first, b_first, close) in sorted(evidence.items())
    ]
    for start in range(0, len(rows), _PAIR_CHUNK):
        statement = insert_(SitePair).values(rows[start : start + _PAIR_CHUNK])
        session.execute(
            statement.on_conflict_do_update(
                index_elements=[SitePair.site_a, SitePair.site_b],
                set_={
                    "shared_pages": SitePair.shared_pages + statement.excluded.shared_pages,
                    "close_pages": SitePair.close_pages + statement.excluded.close_pages,
                    "a_first": SitePair.a_first + statement.excluded.a_first,
                    "b_first": SitePair.b_first + statement.excluded.b_first,
                    "updated_at": now,
                },
            )
        )


# ---------------------------------------------------------------------------------------------- networks


@dataclass(frozen=True)
class NetworkSite:
    site_id: int
    host: str
    name: str
    monitored: bool
    pages: int  # pages with a page Simhash
    shared_pages: int  # near-duplicate page pairs with the other members
    first: int  # of those, pairs where this site had the text first
    first_seen: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "site_id": self.site_id,
            "host": self.host,
            "name": self.name,
            "monitored": self.monitored,
            "pages": self.pages,
            "shared_pages": self.shared_pages,
            "first": self.first,
            "first_seen": iso_utc(self.first_seen),
        }


@dataclass(frozen=True)
class Network:
    """A group of sites serving the same texts; ``id`` is its lowest site id (stable while that site
    stays)."""

    id: int
    sites: tuple[NetworkSite, ...]
    source: NetworkSite
    shared_pages: int
    works: tuple[tuple[int, str, int], ...] = ()  # (work id, title, copies on the network's sites)
    copies: int = 0
    taken_down: int = 0
    links: tuple[tuple[int, int, int], ...] = field(default=(), repr=False)  # (site a, site b, shared)

    @property
    def takedown_rate(self) -> float | None:
        return self.taken_down / self.copies if self.copies else None

    def as_json(self) -> dict[str, Any]:
        return {
            "network": self.id,
            "source": self.source.host,
            "sites": [site.as_json() for site in self.sites],
            "shared_pages": self.shared_pages,
            "works": [{"work_id": w, "title": t, "copies": c} for w, t, c in self.works],
            "copies": self.copies,
            "taken_down": self.taken_down,
            "takedown_rate": None if self.takedown_rate is None else round(self.takedown_rate, 4),
            "links": [{"site_a": a, "site_b": b, "shared_pages": s} for a, b, s in self.links],
        }


def licensed_site_ids(session: Session) -> set[int]:
    """Sites whose host some work licenses (the licensed partners carry the texts legitimately)."""
    hosts = {normalise_site(entry) for entry in session.scalars(select(LicensedSite.site).distinct())}
    if not hosts:
        return set()
    ids = set()
    for site_id, host in session.execute(select(Site.id, Site.host)):
        bare = host.split(":", 1)[0] if host.count(":") == 1 else host
        if any(host == h or bare == h or host.endswith("." + h) or bare.endswith("." + h) for h in hosts):
            ids.add(site_id)
    return ids


def simhashed_pages_per_site(session: Session, settings: Settings, site_ids: Iterable[int]) -> dict[int, int]:
    kind = network_layout(settings).kind
    counts: dict[int, int] = {}
    for chunk in id_chunks(site_ids):
        rows = session.execute(
            select(Page.site_id, func.count())
            .join(Fingerprint, and_(Fingerprint.page_id == Page.id, Fingerprint.kind == kind))
            .where(Page.site_id.in_(chunk))
            .group_by(Page.site_id)
        )
        counts.update({int(site_id or 0): int(count) for site_id, count in rows})
    return counts


def linked_pairs(
    session: Session,
    settings: Settings,
    *,
    min_shared: int | None = None,
    min_share: float | None = None,
    close: bool = True,
) -> list[tuple[int, int, int, int, int]]:
    """The site pairs that make networks: ``(site a, site b, pages, a first, b first)`` with at least
    ``min_shared`` near-duplicate pages, and at least ``min_share`` of the smaller site's Simhashed pages;
    licensed sites left out. ``close``: count only the nearly identical pages (``close_pages``, the rule of
    the product), else every near duplicate within k bits (``shared_pages``)."""
    least = settings.network_min_shared if min_shared is None else min_shared
    share = settings.network_min_share if min_share is None else min_share
    count = SitePair.close_pages if close else SitePair.shared_pages
    rows = [
        (int(a), int(b), int(n), int(fa), int(fb))
        for a, b, n, fa, fb in session.execute(
            select(SitePair.site_a, SitePair.site_b, count, SitePair.a_first, SitePair.b_first)
            .where(count >= max(least, 1))
            .order_by(SitePair.site_a, SitePair.site_b)
        )
    ]
    licensed = licensed_site_ids(session)
    rows = [row for row in rows if row[0] not in licensed and row[1] not in licensed]
    if share > 0 and rows:
        pages = simhashed_pages_per_site(session, settings, {s for row in rows for s in row[:2]})
        rows = [row for row in rows if row[2] >= share * min(pages.get(row[0], 0), pages.get(row[1], 0))]
    return rows


def components(pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Connected components (sorted site ids, lowest first) of the graph of ``pairs``."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = defaultdict(list)
    for x in list(parent):
        groups[root(x)].append(x)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: g[0])


def find_networks(session: Session, settings: Settings) -> list[Network]:
    """The pirate networks as the site-pair evidence stands now (module docstring), largest first."""
    pairs = linked_pairs(session, settings)
    groups = components((a, b) for a, b, *_ in pairs)
    if not groups:
        return []
    members = {s for g in groups for s in g}
    sites = {
        row.id: row
        for chunk in id_chunks(members)
        for row in session.scalars(select(Site).where(Site.id.in_(chunk)))
    }
    pages = simhashed_pages_per_site(session, settings, members)
    first_seen: dict[int, datetime] = {}
    for chunk in id_chunks(members):
        for site_id, moment in session.execute(
            select(Page.site_id, func.min(Page.fetched_at))
            .where(Page.site_id.in_(chunk))
            .group_by(Page.site_id)
        ):
            if moment is not None and site_id is not None:
                first_seen[site_id] = as_utc(moment)
    group_of = {s: i for i, g in enumerate(groups) for s in g}
    shared: dict[int, int] = defaultdict(int)
    first: dict[int, int] = defaultdict(int)
    links: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for a, b, count, a_first, b_first in pairs:
        shared[a] += count
        shared[b] += count
        first[a] += a_first
        first[b] += b_first
        links[group_of[a]].append((a, b, count))
    copies = _copies_per_site(session, members)
    networks = []
    for index, group in enumerate(groups):
        entries = tuple(
            NetworkSite(
                site_id=s,
                host=sites[s].host,
                name=sites[s].name,
                monitored=bool(sites[s].managed),
                pages=pages.get(s, 0),
                shared_pages=shared[s],
                first=first[s],
                first_seen=first_seen.get(s),
            )
            for s in group
        )
        # the source: the site that had the text first most often; then the one seen first
        source = max(
            entries,
            key=lambda e: (e.first, -(e.first_seen.timestamp() if e.first_seen else 1e18), -e.site_id),
        )
        works: dict[int, list[Any]] = {}
        total = down = 0
        for s in group:
            for work_id, title, count, gone in copies.get(s, ()):
                entry = works.setdefault(work_id, [title, 0])
                entry[1] += count
                total += count
                down += gone
        networks.append(
            Network(
                id=group[0],
                sites=entries,
                source=source,
                shared_pages=sum(count for _, _, count in links[index]),
                works=tuple(sorted(((w, t, c) for w, (t, c) in works.items()), key=lambda x: (-x[2], x[0]))),
                copies=total,
                taken_down=down,
                links=tuple(links[index]),
            )
        )
    return sorted(networks, key=lambda n: (-len(n.sites), n.id))


def _copies_per_site(session: Session, site_ids: Iterable[int]) -> dict[int, list[tuple[int, str, int, int]]]:
    """Per site: (work id, title, copies, of which taken down) of the flagged and confirmed matches."""
    result: dict[int, list[tuple[int, str, int, int]]] = defaultdict(list)
    for chunk in id_chunks(site_ids):
        rows = session.execute(
            select(
                Page.site_id,
                Match.work_id,
                Work.title,
                func.count(),
                func.count(Match.taken_down_at),
            )
            .join(Page, Page.id == Match.page_id)
            .join(Work, Work.id == Match.work_id)
            .where(Page.site_id.in_(chunk), Match.status.in_(COPY_STATUSES))
            .group_by(Page.site_id, Match.work_id, Work.title)
        )
        for site_id, work_id, title, count, gone in rows:
            result[int(site_id or 0)].append((int(work_id), str(title), int(count), int(gone)))
    return result
