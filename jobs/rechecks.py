"""Takedown verification: fetch the pages of flagged and confirmed matches again, through the same fetch and
rendering path the crawl used, and record whether the copy is still there.

Each re-check of a match ends in one observation (:data:`storage.models.TAKEDOWN_OUTCOMES`), recorded by
:func:`storage.match_life.observe` (source ``recheck``), the one place where any fetch of a page, a crawl's
or a re-check's, tells about its matches:

- ``gone``: the page answers 404, 410 or 451 (unavailable for legal reasons), or its host no longer exists;
- ``removed``: the page answers 200 but no longer copies the match's chapter. Its text is read as the crawl
  reads it: extracted with the crawler's own parser (:func:`crawler.parse.parse_response`), and first rendered
  in Chromium when the crawl's rule says the page needs a browser (:meth:`crawler.render.RenderPlan.wants`:
  the site's ``render_js`` is ``yes``, or ``auto`` and the static text is short while the page carries a
  script; :class:`crawler.browser_fetch.PageRenderer`). A chapter split over pages (``matches.part_spans``)
  is judged on its parts fetched again and joined, as :mod:`compare.multipage` compared them. The text is
  verified against the chapter with the compare stage's own code (:func:`compare.service.verify_chapters`),
  ignoring the site's template when the page's matches were decided without it (a banner quoting the chapter
  is not the copy). A page answering 200 with no text at all counts only when nothing could have filled it:
  no script, or rendered with every sub-request answered;
- ``present``: the page still copies the chapter (edited or not);
- ``error``: the check could not tell: refused by the private-address guard or robots.txt, timed out,
  connection refused, 5xx, 403, 429, a challenge page ("Just a moment", 安全验证...), a page that needs a
  browser when none could render it, a joined chapter whose parts could not all be fetched. Never a removal.

A removal is recorded once confirmed: the first ``gone`` or ``removed`` leaves it pending and makes the match
due again ``FPTRACK_RECHECK_CONFIRM_AFTER`` seconds later; a second one then confirms it, and
``taken_down_at`` is the time of the first. A copy seen present again after its takedown comes back (same
match, same id, same first-seen). Nothing here deletes or rewrites a match or a page: the page's stored text
is the evidence of the copy, so a re-check only reads the live page.

Cadence: a match is due when its ``recheck_due_at`` has come (NULL: never checked, due at once). After each
check :func:`storage.match_life.next_due` sets the next: every ``FPTRACK_RECHECK_YOUNG_EVERY`` seconds while
the copy is younger than ``FPTRACK_RECHECK_YOUNG_FOR`` (hourly in its first day by default), every
``FPTRACK_RECHECK_AFTER`` after. :func:`run_due_rechecks` is what the beat task ``fptrack.recheck_takedowns``
runs every ``FPTRACK_RECHECK_EVERY`` seconds: it claims ``recheck:takedowns`` in ``monitor_locks`` (one run at
a time, across machines; a claim without heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS`` is taken over) and
checks up to ``FPTRACK_RECHECK_LIMIT`` due matches, the never checked first, then the earliest due.

Fetching: :class:`crawler.guarded_http.GuardedFetcher` (the private-address guard, robots.txt, the site's
delay), one request per page whatever the number of its matches; a rendered page's own document is handed to
the browser rather than downloaded again, and every request the browser makes is guarded and waits for its
turn in the site's shared pace (:mod:`storage.pacing`). The sites of a run are checked side by side, a thread
each (:data:`SITES_AT_ONCE` at a time), each site's pages one after the other at its own pace, those waiting
for the fetch that confirms a removal first: one after the other, a site that rate-limits or whose pages are
rendered in a browser held every other site's checks back, and a removal could wait for its confirmation
past the run's next turn."""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings, classify_allow_entry
from fptrack.crawler.browser_fetch import Document, PageRenderer, RenderFailure
from fptrack.crawler.guard import PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, FetchResult, GuardedFetcher, NoSuchHost
from fptrack.crawler.render import RenderPlan
from fptrack.storage.chunks import id_chunks
from fptrack.storage.db import session_scope
from fptrack.storage.locks import drop_lock, holder_died, refresh_lock, take_lock
from fptrack.storage.match_life import (
    GONE_STATUSES,
    INFRINGING_STATUSES,
    Observation,
    observe,
    replan_due,
)
from fptrack.storage.models import Match, MonitorLock, Page, Site, utcnow
from fptrack.storage.pacing import Pacer
from fptrack.storage.sites import site_of

if TYPE_CHECKING:
    from scrapy.http import Response

    from fptrack.crawler.pages import CrawledPage

__all__ = [
    "LOCK_NAME",
    "RECHECKED_STATUSES",
    "PageRead",
    "PageVerdict",
    "RecheckError",
    "RecheckProgress",
    "RecheckSummary",
    "due_matches",
    "read_response",
    "recheck_matches",
    "refetch_matches",
    "run_due_rechecks",
]

log = logging.getLogger(__name__)

LOCK_NAME = "recheck:takedowns"
RECHECKED_STATUSES = tuple(status.value for status in INFRINGING_STATUSES)
# A challenge page stands between a crawler and the site (Cloudflare's "Just a moment", a captcha): a 200 that
# tells nothing about the copy. Recognised by a marker in a small body with no main text of its own.
CHALLENGE_MARKERS = (
    "cf-chl", "cf_chl", "challenge-platform", "just a moment", "checking your browser", "ddos protection",
    "captcha", "验证码", "安全验证", "人机验证", "安全检查",
)  # fmt: skip
CHALLENGE_MAX_BYTES = 64 * 1024
SITES_AT_ONCE = 4  # sites re-checked side by side, each at its own pace (a thread each)
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)


class RecheckError(FptrackError, ValueError):
    """A re-check that cannot be done as asked (an unknown match id); the message says why, in one line."""


@dataclass(frozen=True)
class PageVerdict:
    """What one re-check found for one match."""

    match_id: int
    outcome: str
    http_status: int | None
    detail: str


@dataclass(frozen=True)
class RecheckProgress:
    """Told after each page: pages done out of pages to check, the page and what its matches came to."""

    done: int
    total: int
    url: str
    outcomes: tuple[str, ...]


@dataclass
class RecheckSummary:
    """What a run of re-checks did: matches by outcome, pages fetched, removals confirmed now
    (``newly_taken_down``), removals seen once and awaiting their confirming fetch (``pending``), copies that
    came back after a takedown (``back``)."""

    outcomes: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    newly_taken_down: int = 0
    pending: int = 0
    back: int = 0
    rendered: int = 0  # pages read through the browser
    skipped: str = ""  # why nothing ran (another run holds the claim)

    @property
    def matches(self) -> int:
        return sum(self.outcomes.values())

    def as_json(self) -> dict[str, object]:
        return {
            "matches": self.matches,
            "pages": self.pages,
            "outcomes": dict(sorted(self.outcomes.items())),
            "newly_taken_down": self.newly_taken_down,
            "pending": self.pending,
            "back": self.back,
            "rendered": self.rendered,
            "skipped": self.skipped,
        }


# ---------------------------------------------------------------------------------------------- what is due


def due_matches(
    session: Session, settings: Settings, *, now: datetime | None = None, limit: int | None = None
) -> list[int]:
    """Ids of the flagged and confirmed matches due for a re-check at ``now``: never checked (no
    ``recheck_due_at``) first, by id, then those whose ``recheck_due_at`` has come, the earliest first; at
    most ``limit`` (default ``FPTRACK_RECHECK_LIMIT``). Both halves walk the index
    ``ix_matches_status_recheck_due_at``. Due times planned under a longer cadence than the current one are
    brought forward first (:func:`storage.match_life.replan_due`; the caller commits)."""
    now = now or utcnow()
    limit = settings.recheck_limit if limit is None else limit
    replan_due(session, settings, now)
    followed = select(Match.id).where(Match.status.in_(RECHECKED_STATUSES))
    never = followed.where(Match.recheck_due_at.is_(None)).order_by(Match.id).limit(limit)
    found = [int(i) for i in session.scalars(never)]
    if len(found) < limit:
        come = (
            followed.where(Match.recheck_due_at <= now)
            .order_by(Match.recheck_due_at, Match.id)
            .limit(limit - len(found))
        )
        found.extend(int(i) for i in session.scalars(come))
    return found


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class PageRead:
    """What the crawl's fetch and rendering path made of one page: its main text (``''``: a page answering
    200 that nothing could have filled), or, when there is no text to judge, the outcome (gone or error) and
    why."""

    url: str
    status: int | None
    text: str | None = None
    outcome: str = ""  # gone / error when ``text`` is None
    detail: str = ""
    rendered: bool = False
    settled: bool = True  # False: rendered while its scripts were still fetching (a removal is not judged)


def _response(url: str, status: int, headers: Mapping[str, str], body: bytes) -> Response:
    """A Scrapy response tied to a request (the crawl's rendering rule reads the request's meta)."""
    from scrapy.http import Request, Response

    return Response(url=url, status=status, headers=dict(headers), body=body, request=Request(url))


def _challenge(body: bytes, text: str, settings: Settings) -> str:
    """The marker of a challenge page (small, with no main text of its own), or ''."""
    if len(body) > CHALLENGE_MAX_BYTES or len(text.strip()) >= settings.render_min_chars:
        return ""
    lowered = body.decode("utf-8", errors="ignore").lower()
    gbk = body.decode("gb18030", errors="ignore")
    for marker in CHALLENGE_MARKERS:
        if marker in lowered or marker in gbk:
            return marker
    return ""


def _wants_rendering(mode: str, settings: Settings, response: Response, page: CrawledPage) -> bool:
    """The crawl's own rule (:meth:`RenderPlan.wants`), asked whether or not a browser is installed: a page
    the crawl would have rendered is never judged on its static HTML (without a browser it is not judged)."""
    if mode not in ("auto", "yes"):
        return False
    rule = RenderPlan(mode=mode, browser="(the rule only)", min_chars=settings.render_min_chars)
    return rule.wants(response, page)


def read_response(
    result: FetchResult,
    *,
    settings: Settings,
    fetched_at: datetime,
    render_js: str = "auto",
    renderer: PageRenderer | None = None,
) -> PageRead:
    """Read the answer ``result`` as the crawl would: gone for 404/410/451, error for any other status but
    200 and for challenge pages, else the main text, rendered first when the crawl's rule asks for it
    (``render_js``: the site's mode)."""
    from fptrack.crawler.parse import parse_response
    from fptrack.crawler.runner import download_limits

    status = result.status
    if status in GONE_STATUSES:
        detail = f"HTTP {status}" + (" (unavailable for legal reasons)" if status == 451 else "")
        return PageRead(result.url, status, outcome="gone", detail=detail)
    if status != 200:
        return PageRead(result.url, status, outcome="error", detail=f"HTTP {status}")
    response = _response(result.final_url, status, result.headers, result.body)
    page = parse_response(
        response,
        requested_url=result.url,
        fetched_at=fetched_at,
        max_chars=settings.max_page_chars,
        file_limits=download_limits(settings),
        max_file_chars=settings.download_max_chars,
    ).page
    if page.error and not page.text:
        if page.error == "empty body":
            return PageRead(result.url, status, text="", detail="HTTP 200 with an empty body")
        return PageRead(result.url, status, outcome="error", detail=f"HTTP 200 but {page.error}")
    marker = _challenge(result.body, page.text, settings)
    if marker:
        return PageRead(result.url, status, outcome="error", detail=f"a challenge page ({marker!r})")
    if _wants_rendering(render_js, settings, response, page):
        if renderer is None:
            detail = "the page is built by scripts and no browser was given to render it"
            return PageRead(result.url, status, outcome="error", detail=detail)
        document = Document(result.final_url, status, result.headers, result.body)
        try:
            rendered = renderer.render(result.final_url, document=document)
        except RenderFailure as error:
            return PageRead(result.url, status, outcome="error", detail=str(error))
        dom = _response(
            rendered.url, 200, {"content-type": "text/html; charset=utf-8"}, rendered.html.encode("utf-8")
        )
        page = parse_response(dom, requested_url=result.url, fetched_at=fetched_at).page
        marker = _challenge(dom.body, page.text, settings)
        if marker:
            detail = f"a challenge page after rendering ({marker!r})"
            return PageRead(result.url, status, outcome="error", detail=detail, rendered=True)
        if not page.text.strip():
            if rendered.failed:
                shown = "; ".join(rendered.failed[:3])
                detail = f"no text after rendering, and some of its requests failed: {shown}"
                return PageRead(result.url, status, outcome="error", detail=detail, rendered=True)
            return PageRead(
                result.url, status, text="", detail="no text after its scripts ran", rendered=True
            )
        return PageRead(result.url, status, text=page.text, rendered=True, settled=rendered.settled)
    if _drawn_as_images(result, page, settings):
        # the crawl read this page's chapter from its images (crawler.images); a re-check does not fetch them,
        # and its short text must not read as a removal
        detail = "a chapter drawn as images: a re-check does not read images, so it cannot tell"
        return PageRead(result.url, status, outcome="error", detail=detail)
    if not page.text.strip():
        if _SCRIPT.search(result.body):
            detail = "HTTP 200 without text, and its scripts were not run (the site's render_js is no)"
            return PageRead(result.url, status, outcome="error", detail=detail)
        return PageRead(result.url, status, text="", detail="HTTP 200 without text")
    return PageRead(result.url, status, text=page.text)


def _drawn_as_images(result: FetchResult, page: CrawledPage, settings: Settings) -> bool:
    """Whether the crawl would read this page's chapter from its images (OCR, docs/downloads.md)."""
    from fptrack.crawler.images import chapter_image_urls, needs_ocr

    if settings.ocr_max_images <= 0 or not needs_ocr(page.text, min_chars=settings.ocr_min_chars):
        return False
    markup = result.body.decode("utf-8", "replace")  # the tags and their URLs are ASCII in any encoding
    return bool(chapter_image_urls(markup, result.final_url, max_images=settings.ocr_max_images))


def read_page(
    url: str,
    fetcher: GuardedFetcher,
    *,
    settings: Settings,
    fetched_at: datetime,
    render_js: str = "auto",
    renderer: PageRenderer | None = None,
) -> PageRead:
    """Fetch ``url`` and read it (:func:`read_response`); a host that no longer exists is gone, a fetch that
    got no answer an error."""
    try:
        result = fetcher.fetch(url)
    except NoSuchHost as error:
        return PageRead(url, None, outcome="gone", detail=str(error))
    except FetchFailure as error:
        return PageRead(url, None, outcome="error", detail=str(error))
    return read_response(
        result, settings=settings, fetched_at=fetched_at, render_js=render_js, renderer=renderer
    )


# ------------------------------------------------------------------------------------------------ judging


def judge_text(
    session: Session,
    text: str,
    chapters: Mapping[int, int],
    *,
    template: Collection[int] = (),
    note: str = "",
) -> dict[int, tuple[str, str]]:
    """match id -> (present or removed, detail) for a page whose main text is ``text``, verified against the
    chapter of each match in ``chapters`` (match id -> chapter id), ``template`` ignored."""
    from fptrack.compare.service import verify_chapters
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    if not text.strip():
        return {m: ("removed", f"HTTP 200 without the copy: {note or 'no text'}") for m in chapters}
    suffix = f" ({note})" if note else ""
    judged: dict[int, tuple[str, str]] = {}
    by_meaning = _meaning_matches(session, chapters)
    if by_meaning:
        judged.update(_judge_meaning(session, text, by_meaning, suffix))
        chapters = {m: c for m, c in chapters.items() if m not in by_meaning}
        if not chapters:
            return judged
    verdicts = verify_chapters(
        session, fingerprint_text(text), set(chapters.values()), ignored_codes=template
    )
    for match_id, chapter_id in chapters.items():
        verdict = verdicts.get(chapter_id)
        common = verdict.copied_chars if verdict is not None else 0
        if verdict is not None and verdict.flagged:
            detail = f"still copies the chapter: {common} characters, score {verdict.score:.2f}{suffix}"
            judged[match_id] = ("present", detail)
        else:
            detail = f"the page no longer copies the chapter ({common} characters in common){suffix}"
            judged[match_id] = ("removed", detail)
    return judged


def _meaning_matches(session: Session, chapters: Mapping[int, int]) -> dict[int, int]:
    """The matches among ``chapters`` (match id -> chapter id) that the meaning path found (``kind`` set)."""
    from fptrack.storage.models import Match

    ids = [
        int(i)
        for i in session.scalars(
            select(Match.id).where(Match.id.in_(list(chapters)), Match.kind.is_not(None))
        )
    ]
    return {i: chapters[i] for i in ids}


def _judge_meaning(
    session: Session, text: str, chapters: Mapping[int, int], suffix: str
) -> dict[int, tuple[str, str]]:
    """A meaning match (a rewrite, a translation) is still there when the page's sentences still align with
    the chapter's (``compare.meaning``, the chapter's stored vectors): the exact path would call it
    removed."""
    from fptrack.compare.meaning import COVERAGE_MIN, align_stored
    from fptrack.compare.meaning_store import chapter_sentences

    stored = chapter_sentences(session, sorted(set(chapters.values())))
    judged: dict[int, tuple[str, str]] = {}
    for match_id, chapter_id in chapters.items():
        chapter = stored.get(chapter_id)
        coverage = (
            align_stored(text, chapter.text, chapter.spans, chapter.vectors).coverage
            if chapter is not None
            else 0.0
        )
        if coverage >= COVERAGE_MIN:
            judged[match_id] = ("present", f"still follows the chapter: coverage {coverage:.2f}{suffix}")
        else:
            judged[match_id] = (
                "removed",
                f"the page no longer follows the chapter (coverage {coverage:.2f}){suffix}",
            )
    return judged


def _judge_joined(
    session: Session,
    head: PageRead,
    parts: Sequence[PageRead],
    chapters: Mapping[int, int],
    template: Collection[int],
) -> dict[int, tuple[str, str]]:
    """The matches of a chapter split over pages, judged on its parts joined as :mod:`compare.multipage`
    joined them. With a part that could not be read, the parts that could are joined: still a copy is
    present, anything else unknown (never a removal judged on part of a chapter)."""
    from fptrack.compare.multipage import join_parts

    assert head.text is not None
    unread = [(number, part) for number, part in enumerate(parts, start=2) if part.text is None]
    joined, _ = join_parts([head.text, *(part.text for part in parts if part.text is not None)])
    judged = judge_text(session, joined, chapters, template=template, note=f"{1 + len(parts)} parts joined")
    if not unread:
        return judged
    number, part = unread[0]
    why = f"part {number} ({part.url}) could not be read: {part.outcome} {part.detail}".rstrip()
    return {
        m: (outcome, detail) if outcome == "present" else ("error", why)
        for m, (outcome, detail) in judged.items()
    }


# ------------------------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class _Target:
    page_id: int
    url: str
    chapters: dict[int, int]  # match id -> chapter id
    # the site whose template the page's matches were decided without (compare.templates), else None
    masked_by: int | None = None
    site_id: int | None = None
    # a chapter split over pages: the matches found on it joined, and the URLs of its later parts in order
    joined: set[int] = field(default_factory=set)
    parts: list[str] = field(default_factory=list)


def _targets(session: Session, match_ids: Sequence[int]) -> list[_Target]:
    pending: set[int] = set()
    pages: dict[int, _Target] = {}
    for chunk in id_chunks(match_ids):
        rows = session.execute(
            select(
                Match.id,
                Match.chapter_id,
                Match.part_spans,
                Page.id,
                Page.url,
                Page.site_id,
                Page.template_masked,
                Match.down_seen_at,
            )
            .join(Page, Page.id == Match.page_id)
            .where(Match.id.in_(chunk))
        )
        for match_id, chapter_id, part_spans, page_id, url, site_id, masked, down_seen in rows:
            masked_by = int(site_id) if masked and site_id is not None else None
            site = int(site_id) if site_id is not None else None
            target = pages.setdefault(int(page_id), _Target(int(page_id), str(url), {}, masked_by, site))
            target.chapters[int(match_id)] = int(chapter_id)
            if down_seen is not None:
                pending.add(int(page_id))
            if part_spans:
                target.joined.add(int(match_id))
                ordered = sorted(
                    (p for p in part_spans if isinstance(p, dict) and p.get("url")),
                    key=lambda p: int(p.get("part") or 0),
                )
                for part in ordered:
                    if str(part["url"]) not in target.parts:
                        target.parts.append(str(part["url"]))
    missing = sorted(set(match_ids) - {m for t in pages.values() for m in t.chapters})
    if missing:
        shown = ", ".join(str(m) for m in missing[:10])
        raise RecheckError(f"no match with id {shown}; see `fptrack matches --status all`")
    # a page with a removal seen once, waiting for its confirming fetch, goes first: its time counts
    return sorted(pages.values(), key=lambda t: (t.page_id not in pending, t.page_id))


def _by_site(targets: Sequence[_Target]) -> list[list[_Target]]:
    """``targets`` in one queue per site, each in its order (pending removals first): a site's pages are
    fetched no faster than its pace, so the sites are checked side by side (:data:`SITES_AT_ONCE`), each at
    its own pace, and a slow site (one that rate-limits, one whose pages are rendered) holds up no other."""
    by_site: dict[str, list[_Target]] = {}
    for target in targets:
        by_site.setdefault(site_of(target.url), []).append(target)
    return list(by_site.values())


@dataclass(frozen=True)
class _SiteRules:
    """A managed site's settings that a re-check follows."""

    delay: float
    obey_robots: bool
    render_js: str = "auto"


def _site_rules(
    session: Session, settings: Settings, targets: Sequence[_Target]
) -> tuple[dict[str, _SiteRules], list[str]]:
    """Per site key, the managed site's delay, robots choice and rendering mode (the global settings for a
    site not managed), and the private-address entries the sites allow (their ``allow_private``)."""
    keys = sorted({site_of(url) for t in targets for url in (t.url, *t.parts)})
    rules: dict[str, _SiteRules] = {}
    allowed: list[str] = []
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        for site in session.scalars(select(Site).where(Site.host.in_(chunk), Site.managed.is_(True))):
            delay = settings.crawl_delay if site.delay is None else float(site.delay)
            rules[site.host] = _SiteRules(delay, bool(site.obey_robots), site.render_js or "auto")
            if site.allow_private:
                hosts = [site_of(url) for url in site.start_urls or ()] + list(site.allowed_hosts or ())
                allowed.extend(classify_allow_entry(h)[1] for h in dict.fromkeys(hosts) if h)
    return rules, allowed


def _browser_pace(pacer: Pacer) -> Callable[[str], None]:
    """``wait_turn(site_key)`` for the requests the browser makes: the same shared pace as the static fetches
    (the site's own rate, else ``FPTRACK_SITE_RATE``)."""

    def wait_turn(key: str) -> None:
        pacer.wait_turn(key)

    return wait_turn


def _judge_target(
    target: _Target,
    read: Callable[[str], PageRead],
    session_for: Callable[[], AbstractContextManager[Session]],
    templates: dict[int, frozenset[int]],
    lock: threading.Lock,
) -> list[PageVerdict]:
    """Read ``target``'s page (and the later parts of a chapter split over pages) with ``read`` and judge
    each of its matches: what one re-check of one page finds, whoever asked for it."""
    head = read(target.url)
    judged: dict[int, tuple[str, str]] = {}
    if head.text is None:
        judged = {m: (head.outcome, head.detail) for m in target.chapters}
    else:
        parts = [read(url) for url in target.parts] if target.joined else []
        with session_for() as session:
            alone = {m: c for m, c in target.chapters.items() if m not in target.joined}
            if alone:
                template = _template_of(session, target, templates, lock)
                judged.update(judge_text(session, head.text, alone, template=template, note=head.detail))
            if target.joined:
                joined = {m: target.chapters[m] for m in target.joined}
                template = _site_template_of(session, target.site_id, templates, lock)
                judged.update(_judge_joined(session, head, parts, joined, template))
    if not head.settled:  # a loading placeholder may stand where the chapter is: no removal
        unsure = "the page's scripts were still fetching when it was read"
        judged = {
            m: ("error", f"{unsure}: {detail}") if outcome == "removed" else (outcome, detail)
            for m, (outcome, detail) in judged.items()
        }
    return [PageVerdict(m, outcome, head.status, detail) for m, (outcome, detail) in sorted(judged.items())]


def _politeness(settings: Settings, rules: Mapping[str, _SiteRules]) -> Callable[[str], tuple[float, bool]]:
    """A site's ``(delay, obey_robots)``: the managed site's, else the global settings'."""

    def politeness(key: str) -> tuple[float, bool]:
        site = rules.get(key)
        if site is None:
            return settings.crawl_delay, settings.crawl_obey_robots
        return site.delay, site.obey_robots

    return politeness


def refetch_matches(
    session: Session,
    settings: Settings,
    match_ids: Collection[int],
    *,
    note: str = "",
    allow_private_hosts: Sequence[str] = (),
    fetcher: GuardedFetcher | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> dict[int, PageVerdict]:
    """Fetch the pages of ``match_ids`` again now, in ``session`` (the caller commits), one after the other:
    what a notice asks just before it is sent or followed up. Each page is fetched and judged as
    :func:`recheck_matches` does (the guard, robots.txt, the site's delay and rendering, joined parts) and
    each observation recorded as a re-check records it (:func:`storage.match_life.observe`: a removal seen
    once waits for its confirming fetch before it is a takedown); ``note`` is added to each observation's
    detail. The verdict of each match. The pace is shared through the database on PostgreSQL; on SQLite
    (one process, and ``session`` may hold the file's write lock) it is kept in this process, at the site's
    rate."""
    ids = sorted({int(m) for m in match_ids})
    if not ids:
        return {}
    targets = _targets(session, ids)
    rules, site_allowed = _site_rules(session, settings, targets)
    policy = PrivateAddressPolicy.from_entries(
        (*settings.allow_private_hosts, *site_allowed, *allow_private_hosts)
    )
    shared = None if settings.is_sqlite else sessionmaker(bind=session.get_bind())
    pacer = Pacer(shared, settings)
    if fetcher is None:
        fetcher = GuardedFetcher(settings, policy, _politeness(settings, rules), pacer=pacer)
    templates: dict[int, frozenset[int]] = {}
    lock = threading.Lock()
    verdicts: list[PageVerdict] = []
    with PageRenderer(settings, policy, wait_turn=_browser_pace(pacer)) as renderer:

        def read(url: str) -> PageRead:
            site = rules.get(site_of(url))
            mode = site.render_js if site is not None else "auto"
            return read_page(
                url, fetcher, settings=settings, fetched_at=clock(), render_js=mode, renderer=renderer
            )

        for target in targets:
            verdicts.extend(_judge_target(target, read, lambda: nullcontext(session), templates, lock))
    suffix = f" ({note})" if note else ""
    observations = [
        Observation(v.match_id, v.outcome, v.http_status, v.detail + suffix, source="recheck")
        for v in verdicts
    ]
    observe(session, observations, settings, now=clock())
    return {v.match_id: v for v in verdicts}


def recheck_matches(
    settings: Settings,
    sessions: sessionmaker[Session],
    match_ids: Collection[int],
    *,
    allow_private_hosts: Sequence[str] = (),
    progress: Callable[[RecheckProgress], None] | None = None,
    heartbeat: Callable[[], None] | None = None,
    fetcher: GuardedFetcher | None = None,
    clock: Callable[[], datetime] = utcnow,
    site_done: Callable[[str], None] | None = None,
) -> RecheckSummary:
    """Re-check the pages of ``match_ids`` now (one fetch per page, rendered and joined as the crawl did),
    recording each match's observation (see the module docstring). :class:`RecheckError` for an unknown id,
    before anything is fetched. ``clock`` gives the time each observation is recorded at; ``site_done(key)``
    is told when the pages of the site ``key`` are all checked (the sites go side by side, see the module
    docstring)."""
    summary = RecheckSummary()
    ids = sorted({int(m) for m in match_ids})
    if not ids:
        return summary
    from fptrack.compare.meaning import use_engine

    use_engine(settings.meaning_engine)  # a meaning match is judged by aligning again (_judge_meaning)
    with session_scope(sessions) as session:
        targets = _targets(session, ids)
        rules, site_allowed = _site_rules(session, settings, targets)
    pacer = Pacer(sessions, settings)  # the sites' shared pace: crawls, re-checks and rendering together
    policy = PrivateAddressPolicy.from_entries(
        (*settings.allow_private_hosts, *site_allowed, *allow_private_hosts)
    )
    if fetcher is None:
        fetcher = GuardedFetcher(settings, policy, _politeness(settings, rules), pacer=pacer)
    templates: dict[int, frozenset[int]] = {}  # site id -> its template, decided once per run
    lock = threading.Lock()  # the summary, the templates, the progress count and the heartbeat
    done = [0]

    def check(target: _Target, renderer: PageRenderer) -> None:
        def read(url: str, now: datetime) -> PageRead:
            site = rules.get(site_of(url))
            mode = site.render_js if site is not None else "auto"
            found = read_page(
                url, fetcher, settings=settings, fetched_at=now, render_js=mode, renderer=renderer
            )
            with lock:
                summary.rendered += int(found.rendered)
            return found

        verdicts = _judge_target(
            target, lambda url: read(url, clock()), lambda: session_scope(sessions), templates, lock
        )
        observations = [
            Observation(v.match_id, v.outcome, v.http_status, v.detail, source="recheck") for v in verdicts
        ]
        # seen when the answers came, not when the turn was asked for (a wait for the site's pace, or a
        # render, can take seconds): a removal is never dated before the fetch that saw it
        with session_scope(sessions) as session:
            observed = observe(session, observations, settings, now=clock())
        with lock:
            summary.newly_taken_down += observed.confirmed
            summary.pending += observed.pending
            summary.back += observed.back
            summary.pages += 1
            summary.outcomes.update(v.outcome for v in verdicts)
            done[0] += 1
            if heartbeat is not None:
                heartbeat()
            if progress is not None:
                progress(
                    RecheckProgress(done[0], len(targets), target.url, tuple(v.outcome for v in verdicts))
                )

    def check_site(queue: Sequence[_Target]) -> None:
        # a browser per thread (Playwright's synchronous API stays in the thread that started it), started
        # only by a thread whose site needs one
        with PageRenderer(settings, policy, wait_turn=_browser_pace(pacer)) as renderer:
            for target in queue:
                check(target, renderer)
        if site_done is not None:
            site_done(site_of(queue[0].url))

    queues = _by_site(targets)
    if len(queues) <= 1:
        for queue in queues:
            check_site(queue)
        return summary
    with ThreadPoolExecutor(min(SITES_AT_ONCE, len(queues)), thread_name_prefix="fptrack-recheck") as pool:
        for future in [pool.submit(check_site, queue) for queue in queues]:
            future.result()  # a failure (the database gone) ends the run as it would have sequentially
    return summary


def _template_of(
    session: Session, target: _Target, templates: dict[int, frozenset[int]], lock: threading.Lock
) -> frozenset[int]:
    """The template hashes to ignore on ``target``: its site's (decided once per run, kept in ``templates``)
    when its matches were decided without them, else none."""
    if target.masked_by is None:
        return frozenset()
    return _site_template_of(session, target.masked_by, templates, lock)


def _site_template_of(
    session: Session, site_id: int | None, templates: dict[int, frozenset[int]], lock: threading.Lock
) -> frozenset[int]:
    """The site's template (decided once per run): what a chapter split over pages was compared without.
    A site's pages are checked by one thread, so deciding it outside the lock decides it once."""
    if site_id is None:
        return frozenset()
    with lock:
        known = templates.get(site_id)
    if known is None:
        from fptrack.compare.templates import site_template

        known = site_template(session, site_id)
        with lock:
            templates[site_id] = known
    return known


# --------------------------------------------------------------------------------------------- the claim


def _claim(session: Session, settings: Settings, now: datetime, name: str = LOCK_NAME) -> str | None:
    """Take the claim ``name`` (``recheck:takedowns``, or a site's, :func:`site_lock_name`; a dead holder's
    claim is taken over); the token, or None when a live run holds it."""
    held = session.get(MonitorLock, name, with_for_update=True)
    if held is not None:
        if not holder_died(held, now - timedelta(seconds=settings.crawl_stale_seconds)):
            return None
        log.warning("taking over the claim %s of a re-check run that died (%s)", name, held.owner)
        drop_lock(session, name, held.token)
    return take_lock(session, name, now)


def site_lock_name(key: str) -> str:
    """The claim on one site's re-checks (``monitor_locks.name``, 100 characters at most)."""
    name = f"{LOCK_NAME}:{key}"
    if len(name) <= 100:
        return name
    return f"{LOCK_NAME}:{hashlib.sha256(key.encode('utf-8')).hexdigest()[:32]}"


def _by_site_key(session: Session, match_ids: Sequence[int]) -> dict[str, list[int]]:
    """``match_ids`` by the site key of their page, each site's in their order."""
    urls: dict[int, str] = {}
    for chunk in id_chunks(match_ids):
        rows = session.execute(
            select(Match.id, Page.url).join(Page, Page.id == Match.page_id).where(Match.id.in_(chunk))
        )
        urls.update((int(m), str(u)) for m, u in rows)
    grouped: dict[str, list[int]] = {}
    for match_id in match_ids:
        if match_id in urls:
            grouped.setdefault(site_of(urls[match_id]), []).append(match_id)
    return grouped


def run_due_rechecks(
    settings: Settings,
    sessions: sessionmaker[Session],
    *,
    progress: Callable[[RecheckProgress], None] | None = None,
) -> RecheckSummary:
    """Re-check the matches that are due (skipped when another run holds ``recheck:takedowns``).

    The run holds ``recheck:takedowns`` only while it picks what to check: it claims each site whose matches
    are due (:func:`site_lock_name`; a site another run is checking is left to it) and lets the claim go, so
    the next turn of the beat, in another worker process, can take the sites this one has not. Each site's
    claim is released as soon as its pages are checked: a site whose pages are slow to read (rendered in a
    browser, paced by a site that rate-limits) holds back no other site's next checks, a removal's
    confirming fetch among them."""
    with session_scope(sessions) as session:
        token = _claim(session, settings, utcnow())
    if token is None:
        return RecheckSummary(skipped="another takedown re-check run is under way")
    claims: dict[str, str] = {}  # site key -> the token of its claim, while its pages are being checked
    claims_lock = threading.Lock()
    try:
        with session_scope(sessions) as session:
            due = due_matches(session, settings)
            grouped = _by_site_key(session, due)
        now = utcnow()
        for key in grouped:
            with session_scope(sessions) as session:
                site_token = _claim(session, settings, now, site_lock_name(key))
            if site_token is not None:
                claims[key] = site_token
    finally:
        with session_scope(sessions) as session:
            drop_lock(session, LOCK_NAME, token)
    busy = [key for key in grouped if key not in claims]
    if busy:
        log.info("re-checks of %d site(s) are under way in another run: %s", len(busy), ", ".join(busy[:5]))

    def heartbeat() -> None:
        with claims_lock:
            held = list(claims.items())
        with session_scope(sessions) as session:
            for key, site_token in held:
                refresh_lock(session, site_lock_name(key), site_token)

    def site_done(key: str) -> None:
        with claims_lock:
            site_token = claims.pop(key, None)
        if site_token is not None:
            with session_scope(sessions) as session:
                drop_lock(session, site_lock_name(key), site_token)

    mine = [m for key, ids in grouped.items() if key in claims for m in ids]
    try:
        return recheck_matches(
            settings, sessions, mine, progress=progress, heartbeat=heartbeat, site_done=site_done
        )
    finally:
        for key in list(claims):
            site_done(key)
