"""Discovery: the pirate sites nobody listed, proposed, probed and queued for a person's decision.

Candidates come from three places (``discovery_candidates.source``):

1. ``link``: the monitored pirate sites themselves. Their home page (and one page of theirs that copies a
   registered chapter) is fetched, and every host their links point to is kept per site
   (``site_outbound_hosts``: a plain ``link``, a ``mirror`` notice -- 新域名, 最新网址, 备用网址, 永久网址,
   镜像, "mirror", "new domain", linked or written out as text -- or a ``redirect`` of the site to another
   host). The crawl store keeps no links, so this is the record of where pirate sites send their readers;
2. ``search``: each registered work searched the way readers search for it (:mod:`jobs.search_providers`);
3. ``network``: a site whose pages are near duplicates of a monitored pirate site's (:mod:`compare.networks`)
   and that nobody monitors yet.

A host already monitored, licensed for a work, or already a candidate (whatever its state: a rejected or
licensed one stays decided) is never proposed again. Every new candidate is **probed**: at most
``FPTRACK_DISCOVERY_PROBE_PAGES`` pages, following from its landing page the links that look like chapters
or like a registered work's title, fetched by :class:`crawler.guarded_http.GuardedFetcher` (the
private-address guard on every hop, robots.txt, the site's pace), then compared with the registry exactly as
a crawled page would be (``compare.service.compare_document``) without storing anything. Its score is the
share of probed text pages that copy a registered chapter; it is ``probed`` (copies found: waiting for a
person), ``clean`` or ``failed``. The page Simhash of each probed page is looked up too, so a candidate that
mirrors a known site says which (``mirror_of_site_id``).

Fetches are guarded as a crawl's are: a monitored site allowed to reach a private address (its
``allow_private``) lets discovery fetch it too, and ``--allow-private-host`` / ``FPTRACK_ALLOW_PRIVATE_HOSTS``
let probes reach candidates on such addresses. What the guard refused is reported (``refused``: host -> the
guard's reason, which says how to allow it), never counted as a request; a candidate whose probe was refused
stays ``new`` (with the reason as its error) and is probed by the next run that may reach it.

Nothing is crawled beyond the probe without a person's :func:`accept_candidate` (a monitored site with the
``FPTRACK_DISCOVERY_SCHEDULE`` schedule), unless ``FPTRACK_DISCOVERY_AUTO_MONITOR`` is set and the score
reaches it. :func:`reject_candidate` and :func:`license_candidate` are remembered.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare.licensing import add_licensed_site, is_licensed, normalise_site
from fptrack.compare.networks import MIN_PAGE_CHARS, find_networks, network_layout, page_simhash
from fptrack.compare.service import compare_document
from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.crawler.extract import extract_main_text
from fptrack.crawler.guard import GUARD_REFUSAL, PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, FetchResult, GuardedFetcher
from fptrack.crawler.parse import charset_from_content_type, charset_from_meta
from fptrack.fingerprint.text_fingerprints import fingerprint_text
from fptrack.jobs.search_providers import SearchError, SearchProvider, provider_named, queries_for_work
from fptrack.jobs.sites import SiteSpec, add_site, crawl_options
from fptrack.storage.db import session_scope
from fptrack.storage.models import (
    Chapter,
    DiscoveryCandidate,
    LicensedSite,
    Match,
    MatchStatus,
    Page,
    Site,
    SiteOutboundHost,
    Work,
    iso_utc,
    utcnow,
)
from fptrack.storage.simhash_index import simhash_candidates
from fptrack.storage.sites import site_of

__all__ = [
    "CandidateError",
    "DiscoveryReport",
    "ProbeResult",
    "accept_candidate",
    "candidate_json",
    "license_candidate",
    "list_candidates",
    "outbound_links",
    "probe_site",
    "reject_candidate",
    "run_discovery",
]

log = logging.getLogger(__name__)

MIRROR_WORDS = (
    "新域名", "最新网址", "最新域名", "备用网址", "备用域名", "永久网址", "永久域名", "新网址", "镜像",
    "mirror", "new domain", "new address",
)  # fmt: skip
_MIRROR_TEXT = re.compile(
    r"(?:" + "|".join(re.escape(w) for w in MIRROR_WORDS) + r")[^a-z0-9\n]{0,12}"
    r"((?:https?://)?(?:[a-z0-9-]+\.)+[a-z0-9-]{2,}(?::\d{2,5})?)",
    re.IGNORECASE,
)
_CHAPTER_ANCHOR = re.compile(
    r"第\s*[0-9零一二三四五六七八九十百千两]+\s*[章回节卷]|chapter\s*\d+", re.IGNORECASE
)
COPY_STATUSES = (MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value)
_DECIDED = ("accepted", "rejected", "licensed")


class CandidateError(FptrackError, ValueError):
    """A candidate decision that cannot be made (unknown id, already decided); the message says why."""


# ---------------------------------------------------------------------------------------------- fetching


class CountingFetcher(GuardedFetcher):
    """The guarded client, counting per site the requests it sends (robots.txt included) and keeping what the
    private-address guard refused (site -> its reason): a refused request is never sent, so never counted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: Counter[str] = Counter()
        self.refused: dict[str, str] = {}

    def allow(self, entries: Iterable[str]) -> None:
        """Let the guard pass these entries too (host, host:port or network), e.g. a monitored site's own."""
        extra = PrivateAddressPolicy.from_entries(entries)
        self.policy = replace(
            self.policy,
            hosts=self.policy.hosts | extra.hosts,
            networks=(*self.policy.networks, *extra.networks),
        )

    def _destination(self, url: str) -> tuple[str, str, int, str]:
        try:
            destination = super()._destination(url)
        except FetchFailure as error:
            if str(error).startswith(GUARD_REFUSAL):
                self.refused.setdefault(site_of(url), str(error))
            raise
        self.requests[site_of(url)] += 1
        return destination


def make_fetcher(settings: Settings, allow_private: Iterable[str] = ()) -> CountingFetcher:
    policy = PrivateAddressPolicy.from_entries((*settings.allow_private_hosts, *allow_private))
    return CountingFetcher(settings, policy, lambda _key: (settings.crawl_delay, settings.crawl_obey_robots))


def _decode(result: FetchResult) -> str:
    charset = charset_from_content_type(result.headers.get("content-type", "")) or charset_from_meta(
        result.body
    )
    for encoding in (charset, "utf-8", "gb18030"):
        if not encoding:
            continue
        try:
            return result.body.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return result.body.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Anchor:
    url: str
    text: str
    context: str  # the text of the anchor's parent: "新域名：<a>...</a>"


def anchors(markup: str, base_url: str) -> list[Anchor]:
    """Every ``<a href>`` of a document as an absolute http(s) URL with its text and its parent's text."""
    try:
        root = lxml.html.fromstring(markup)
    except (ValueError, lxml.etree.ParserError):
        return []
    found = []
    for element in root.iter("a"):
        href = (element.get("href") or "").strip()
        if not href or href.startswith(("#", "javascript:", "mailto:")):
            continue
        try:
            url = urljoin(base_url, href).split("#", 1)[0]
        except ValueError:
            continue
        if urlsplit(url).scheme not in ("http", "https"):
            continue
        parent = element.getparent()
        context = parent.text_content() if parent is not None else ""
        found.append(Anchor(url, element.text_content().strip(), context.strip()[:200]))
    return found


def outbound_links(markup: str, base_url: str, own_host: str) -> dict[str, tuple[str, str]]:
    """host -> (kind, an example URL) of what a page points to off its own site: ``mirror`` for a link or a
    written-out address next to a mirror notice, ``link`` for any other link."""
    found: dict[str, tuple[str, str]] = {}
    for anchor in anchors(markup, base_url):
        host = site_of(anchor.url)
        if not host or host == own_host:
            continue
        text = f"{anchor.text} {anchor.context}".lower()
        kind = "mirror" if any(word in text for word in MIRROR_WORDS) else "link"
        if found.get(host, ("link",))[0] != "mirror":
            found[host] = (kind, anchor.url)
    try:
        visible = lxml.html.fromstring(markup).text_content()
    except (ValueError, lxml.etree.ParserError):
        visible = ""
    for match in _MIRROR_TEXT.finditer(visible):
        address = match.group(1)
        url = address if "://" in address else f"http://{address}"
        host = site_of(url)
        if host and host != own_host and found.get(host, ("link",))[0] != "mirror":
            found[host] = ("mirror", url)
    return found


# ------------------------------------------------------------------------------------------------ probing


@dataclass
class ProbeResult:
    """What probing a candidate found: pages fetched, text pages among them, copies (pages copying a
    registered chapter) of ``works``, the requests spent, a known site it mirrors, or the error."""

    url: str
    pages: int = 0
    text_pages: int = 0
    copies: int = 0
    works: set[int] = field(default_factory=set)
    requests: int = 0
    mirror_of: int | None = None
    error: str = ""

    @property
    def score(self) -> float:
        return round(self.copies / self.text_pages, 4) if self.text_pages else 0.0


def probe_site(
    session: Session,
    url: str,
    settings: Settings,
    fetcher: CountingFetcher,
    *,
    titles: Sequence[str] = (),
    known_sites: Iterable[int] = (),
) -> ProbeResult:
    """Fetch at most ``settings.discovery_probe_pages`` pages of the site of ``url`` (landing page first, then
    the links that look like chapters or name a work of ``titles``) and compare each with the registry;
    nothing is stored. ``known_sites``: sites whose near-identical pages make the candidate their mirror."""
    host = site_of(url)
    result = ProbeResult(url=url)
    before = fetcher.requests[host]
    known = set(known_sites)
    layout = network_layout(settings)
    queue: dict[str, int] = {url: 100}
    seen: set[str] = set()
    mirrors: Counter[int] = Counter()
    while queue and result.pages < settings.discovery_probe_pages:
        next_url = max(queue, key=lambda u: (queue[u], -len(u)))
        del queue[next_url]
        seen.add(next_url)
        try:
            response = fetcher.fetch(next_url)
        except FetchFailure as error:
            if result.pages == 0:
                result.error = str(error)
                break
            continue
        result.pages += 1
        if response.status != 200 or site_of(response.final_url) != host:
            if result.pages == 1 and response.status != 200:
                result.error = f"HTTP {response.status}"
            continue
        markup = _decode(response)
        extracted = extract_main_text(markup, response.final_url, max_chars=settings.max_page_chars)
        for anchor in anchors(markup, response.final_url):
            if site_of(anchor.url) != host or anchor.url in seen:
                continue
            rank = (
                1
                + 3 * bool(_CHAPTER_ANCHOR.search(anchor.text))
                + 2 * any(t and t in anchor.text for t in titles)
            )
            queue[anchor.url] = max(queue.get(anchor.url, 0), rank)
        document = fingerprint_text(extracted.text)
        if len(document.text) < MIN_PAGE_CHARS:
            continue
        result.text_pages += 1
        flagged = [v for v in compare_document(session, document, settings) if v.flagged]
        if flagged:
            result.copies += 1
            result.works.update(v.work_id for v in flagged)
        value = page_simhash(extracted.text)
        if value is not None and known:
            hits = simhash_candidates(session, value, layout, owner="page")
            if hits:
                ids = [hit.owner_id for hit in hits]
                for site_id in session.scalars(select(Page.site_id).where(Page.id.in_(ids))):
                    if site_id in known:
                        mirrors[site_id] += 1
    result.requests = fetcher.requests[host] - before
    if mirrors:
        result.mirror_of = mirrors.most_common(1)[0][0]
    return result


# --------------------------------------------------------------------------------------------- discovery


@dataclass
class DiscoveryReport:
    seeds: list[str] = field(default_factory=list)
    proposed: int = 0
    probed: int = 0
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # rate-limit waits, a provider's end date
    searches: dict[str, int] = field(default_factory=dict)  # provider -> requests sent to its API (its bill)
    refused: dict[str, str] = field(default_factory=dict)  # host -> why the private-address guard refused it
    unreachable: dict[str, str] = field(default_factory=dict)  # a seed's URL -> why it could not be fetched
    candidates: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "seeds": self.seeds,
            "proposed": self.proposed,
            "probed": self.probed,
            "requests": self.requests,
            "errors": self.errors,
            "warnings": self.warnings,
            "searches": self.searches,
            "refused": self.refused,
            "unreachable": self.unreachable,
            "candidates": self.candidates,
        }


def _pirate_seeds(session: Session, site_name: str | None) -> list[Site]:
    """The monitored sites discovery starts from: the one named, else every enabled monitored site with a
    flagged or confirmed copy."""
    if site_name:
        from fptrack.jobs.sites import find_site

        return [find_site(session, site_name)]
    with_copies = (
        select(Page.site_id)
        .join(Match, Match.page_id == Page.id)
        .where(Match.status.in_(COPY_STATUSES), Page.site_id.is_not(None))
        .distinct()
    )
    return list(
        session.scalars(
            select(Site)
            .where(Site.managed.is_(True), Site.enabled.is_(True), Site.id.in_(with_copies))
            .order_by(Site.id)
        )
    )


class _Proposals:
    """The hosts that may not be proposed, and the candidates proposed in this run."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.blocked = set(session.scalars(select(Site.host).where(Site.managed.is_(True))))
        self.blocked.update(session.scalars(select(DiscoveryCandidate.host)))
        self.licensed = {normalise_site(s) for s in session.scalars(select(LicensedSite.site).distinct())}
        self.new: list[DiscoveryCandidate] = []

    def propose(self, url: str, source: str, detail: str, via_site_id: int | None = None) -> bool:
        host = site_of(url)
        if not host or host in self.blocked or is_licensed(url, list(self.licensed)):
            return False
        self.blocked.add(host)
        candidate = DiscoveryCandidate(
            host=host,
            url=url,
            source=source,
            detail=detail[:2000],
            via_site_id=via_site_id,
            state="new",
            score=0.0,
            copies=0,
            pages_probed=0,
            requests=0,
            works=[],
            error="",
            decided_by="",
        )
        self.session.add(candidate)
        self.new.append(candidate)
        return True


def _links_of_seed(
    session: Session, site: Site, fetcher: CountingFetcher, proposals: _Proposals, report: DiscoveryReport
) -> int:
    """Fetch the seed's home page (its first start URL) and one page of it that copies a registered chapter;
    keep the hosts they point to and propose them; a page that could not be fetched goes in the report's
    ``unreachable``. Returns the requests spent."""
    before = sum(fetcher.requests.values())
    urls = [str(site.start_urls[0])] if site.start_urls else [f"http://{site.host}/"]
    copied = session.scalar(
        select(Page.url)
        .join(Match, Match.page_id == Page.id)
        .where(Page.site_id == site.id, Match.status.in_(COPY_STATUSES))
        .order_by(Page.id)
        .limit(1)
    )
    if copied and copied not in urls:
        urls.append(copied)
    found: dict[str, tuple[str, str]] = {}
    for url in urls:
        try:
            response = fetcher.fetch(url)
        except FetchFailure as error:
            report.unreachable[url] = str(error)
            continue
        final = site_of(response.final_url)
        if final and final != site.host:
            found[final] = ("redirect", response.final_url)
        if response.status == 200:
            for host, (kind, example) in outbound_links(
                _decode(response), response.final_url, site.host
            ).items():
                if found.get(host, ("link",))[0] == "link":
                    found[host] = (kind, example)
    now = utcnow()
    for host, (kind, example) in found.items():
        row = session.get(SiteOutboundHost, (site.id, host))
        if row is None:
            row = SiteOutboundHost(site_id=site.id, host=host, kind=kind, links=1, example_url=example[:2048])
            row.first_seen = row.last_seen = now
            session.add(row)
        else:
            row.links += 1
            row.last_seen = now
            if kind != "link":
                row.kind = kind
    # mirror notices and redirects first: the likeliest new homes of the same site
    order = {"redirect": 0, "mirror": 1, "link": 2}
    for host, (kind, example) in sorted(found.items(), key=lambda item: (order[item[1][0]], item[0])):
        words = {"redirect": "redirect from", "mirror": "mirror notice on", "link": "linked from"}[kind]
        proposals.propose(example, "link", f"{words} {site.host}", site.id)
    session.flush()
    return sum(fetcher.requests.values()) - before


def _search(
    session: Session,
    providers: Sequence[SearchProvider],
    works: Sequence[Work],
    proposals: _Proposals,
    report: DiscoveryReport,
) -> None:
    for provider in providers:
        failed: dict[str, int] = {}  # each error once, with the number of works it cost
        for work in works:
            chapters = session.scalars(
                select(Chapter).where(Chapter.work_id == work.id).order_by(Chapter.index).limit(2)
            )
            queries = queries_for_work(work.title, work.text, [c.text for c in chapters])
            try:
                for query in queries:
                    for result in provider.search(query):
                        proposals.propose(result.url, "search", f"{provider.name}: {query}")
            except SearchError as error:
                failed[str(error)] = failed.get(str(error), 0) + 1
                if error.stop:
                    break  # out of quota, a refused key: the other works wait for the next run
        report.errors.extend(f"{line} ({n} works)" if n > 1 else line for line, n in failed.items())
        report.warnings.extend(provider.summary())
        report.searches[provider.name] = report.searches.get(provider.name, 0) + provider.requests
    session.flush()


def _from_networks(session: Session, settings: Settings, proposals: _Proposals) -> None:
    for network in find_networks(session, settings):
        if not any(site.monitored for site in network.sites):
            continue
        for site in network.sites:
            if site.monitored:
                continue
            url = session.scalar(
                select(Page.url).where(Page.site_id == site.site_id).order_by(Page.id).limit(1)
            )
            proposals.propose(url or f"http://{site.host}/", "network", f"network of {network.source.host}")
    session.flush()


def run_discovery(
    sessions: sessionmaker[Session],
    settings: Settings,
    *,
    site_name: str | None = None,
    providers: Sequence[SearchProvider] | None = None,
    fetcher: CountingFetcher | None = None,
    allow_private: Iterable[str] = (),
    probe: bool = True,
) -> DiscoveryReport:
    """Propose candidates from links, search and networks, then probe every new one (module docstring).
    Each step commits, so that what was found survives a failing later step."""
    report = DiscoveryReport()
    fetcher = fetcher or make_fetcher(settings, allow_private)
    if providers is None:
        providers = []
        for name in settings.search_providers:  # a provider that cannot be used leaves the others working
            try:
                providers.append(provider_named(name, settings))
            except SearchError as error:
                report.errors.append(str(error))
    with session_scope(sessions) as session:
        seeds = _pirate_seeds(session, site_name)
        report.seeds = [site.host for site in seeds]
        for site in seeds:  # a site allowed to reach a private address is allowed here too
            fetcher.allow(crawl_options(site).allow_private_hosts)
        proposals = _Proposals(session)
        for site in seeds:
            report.requests += _links_of_seed(session, site, fetcher, proposals, report)
        if providers:
            if site_name:
                copied = (
                    select(Match.work_id)
                    .join(Page, Page.id == Match.page_id)
                    .where(Page.site_id.in_([s.id for s in seeds]))
                )
                works = list(session.scalars(select(Work).where(Work.id.in_(copied)).order_by(Work.id)))
            else:
                works = list(session.scalars(select(Work).order_by(Work.id)))
            _search(session, providers, works, proposals, report)
        _from_networks(session, settings, proposals)
        report.proposed = len(proposals.new)
    if probe:
        report.requests += _probe_new(sessions, settings, fetcher, report)
    report.refused = dict(fetcher.refused)
    with session_scope(sessions) as session:
        report.candidates = [candidate_json(c) for c in list_candidates(session)]
    return report


def _probe_new(
    sessions: sessionmaker[Session], settings: Settings, fetcher: CountingFetcher, report: DiscoveryReport
) -> int:
    spent = 0
    with session_scope(sessions) as session:
        ids = list(session.scalars(select(DiscoveryCandidate.id).where(DiscoveryCandidate.state == "new")))
        titles = list(session.scalars(select(Work.title)))
        known = set(session.scalars(select(Site.id).where(Site.managed.is_(True))))
    for candidate_id in ids:
        with session_scope(sessions) as session:
            candidate = session.get(DiscoveryCandidate, candidate_id)
            if candidate is None or candidate.state != "new":
                continue
            result = probe_site(session, candidate.url, settings, fetcher, titles=titles, known_sites=known)
            if result.pages == 0 and result.error.startswith(GUARD_REFUSAL):
                candidate.error = result.error  # not probed: the next run allowed to reach it probes it
                continue
            candidate.pages_probed = result.pages
            candidate.requests += result.requests
            candidate.copies = result.copies
            candidate.works = sorted(result.works)
            candidate.score = result.score
            candidate.mirror_of_site_id = result.mirror_of
            candidate.error = result.error
            candidate.probed_at = utcnow()
            candidate.state = (
                "failed" if result.error and not result.copies else "probed" if result.copies else "clean"
            )
            spent += result.requests
            report.probed += 1
            auto = settings.discovery_auto_monitor_score
            if auto is not None and candidate.state == "probed" and candidate.score >= auto:
                _accept(session, candidate, settings, by="auto-monitor", allow_private=False)
    return spent


# ---------------------------------------------------------------------------------------------- decisions


def list_candidates(session: Session, state: str | None = None) -> list[DiscoveryCandidate]:
    """The candidates, the likeliest pirates first (score, copies), then the newest."""
    query = select(DiscoveryCandidate)
    if state:
        query = query.where(DiscoveryCandidate.state == state)
    rows = list(session.scalars(query))
    return sorted(rows, key=lambda c: (-c.score, -c.copies, c.id))


def candidate_json(candidate: DiscoveryCandidate) -> dict[str, Any]:
    return {
        "id": candidate.id,
        "url": candidate.url,
        "host": candidate.host,
        "source": candidate.source,
        "detail": candidate.detail,
        "state": candidate.state,
        "score": candidate.score,
        "copies": candidate.copies,
        "pages_probed": candidate.pages_probed,
        "requests": candidate.requests,
        "works": list(candidate.works or []),
        "mirror_of_site_id": candidate.mirror_of_site_id,
        "error": candidate.error,
        "site_id": candidate.site_id,
        "created_at": iso_utc(candidate.created_at),
        "probed_at": iso_utc(candidate.probed_at),
        "decided_at": iso_utc(candidate.decided_at),
        "decided_by": candidate.decided_by,
    }


def _candidate(session: Session, candidate_id: int) -> DiscoveryCandidate:
    candidate = session.get(DiscoveryCandidate, candidate_id)
    if candidate is None:
        raise CandidateError(f"no candidate with id {candidate_id}; see `fptrack candidates list`")
    if candidate.state in _DECIDED:
        raise CandidateError(f"candidate {candidate_id} ({candidate.host}) is {candidate.state} already")
    return candidate


def _accept(
    session: Session, candidate: DiscoveryCandidate, settings: Settings, *, by: str, allow_private: bool
) -> Site:
    name = re.sub(r"[^\w.-]+", "-", candidate.host).strip("-") or f"candidate-{candidate.id}"
    if session.scalar(select(Site.id).where(Site.managed.is_(True), Site.name == name)) is not None:
        name = f"{name}-{candidate.id}"
    spec = SiteSpec(
        name=name,
        start_urls=(candidate.url,),
        schedule=settings.discovery_schedule,
        allow_private=allow_private,
    )
    site = add_site(session, spec, tick=settings.schedule_every)
    candidate.state = "accepted"
    candidate.site_id = site.id
    candidate.decided_at = utcnow()
    candidate.decided_by = by
    return site


def accept_candidate(
    session: Session, candidate_id: int, settings: Settings, *, by: str = "", allow_private: bool = False
) -> Site:
    """Monitor the candidate's site (start URL: the candidate's URL; schedule ``FPTRACK_DISCOVERY_SCHEDULE``);
    ``allow_private`` lets its crawls reach a private or loopback address."""
    return _accept(session, _candidate(session, candidate_id), settings, by=by, allow_private=allow_private)


def reject_candidate(session: Session, candidate_id: int, *, by: str = "") -> DiscoveryCandidate:
    """Not a pirate site: remembered, never proposed again."""
    candidate = _candidate(session, candidate_id)
    candidate.state = "rejected"
    candidate.decided_at = utcnow()
    candidate.decided_by = by
    return candidate


def license_candidate(session: Session, candidate_id: int, *, by: str = "") -> DiscoveryCandidate:
    """A licensed partner: remembered, and licensed for every work its probe found copied (its copies there
    are recorded as licensed, not flagged)."""
    candidate = _candidate(session, candidate_id)
    for work_id in candidate.works or []:
        if session.get(Work, int(work_id)) is not None:
            add_licensed_site(session, int(work_id), candidate.host)
    candidate.state = "licensed"
    candidate.decided_at = utcnow()
    candidate.decided_by = by
    return candidate
