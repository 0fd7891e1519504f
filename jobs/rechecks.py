"""Takedown verification: fetch the pages of flagged and confirmed matches again and record whether the copy
is still there.

Each re-check of a match ends in one outcome (:data:`storage.models.TAKEDOWN_OUTCOMES`):

- ``gone``: the page answers 404, 410 or 451 (unavailable for legal reasons), or its host no longer exists;
- ``removed``: the page is still there (200) but no longer copies the match's chapter: its text is extracted
  with the crawler's own parser (:func:`crawler.parse.parse_response`) and verified against the chapter with
  the compare stage's own code (:func:`compare.service.verify_chapters`), ignoring the site's template when
  the page's matches were decided without it (a banner quoting the chapter is not the copy); a page with no
  text left counts too;
- ``present``: the page still copies the chapter (edited or not);
- ``error``: the check could not tell (refused by the private-address guard or robots.txt, timed out,
  connection refused, 5xx, 403...). An error changes nothing but ``rechecked_at`` and ``recheck_state``.

Every check is a ``takedown_checks`` row (history); the match carries the latest (``rechecked_at``,
``recheck_state``) and ``taken_down_at``, the first check that found it gone or removed, cleared when a later
check finds the copy present again. Nothing here deletes or rewrites a match or a page: the page's stored text
is the evidence of the copy, so a re-check only reads the live page.

Fetching: :class:`crawler.guarded_http.GuardedFetcher` (the private-address guard, robots.txt, the site's
delay), one request per page whatever the number of its matches. :func:`run_due_rechecks` is what the beat
task ``fptrack.recheck_takedowns`` runs: it claims ``recheck:takedowns`` in ``monitor_locks`` (one run at a
time, across machines; a claim without heartbeat for ``FPTRACK_CRAWL_STALE_SECONDS`` is taken over) and checks
up to ``FPTRACK_RECHECK_LIMIT`` matches not re-checked for ``FPTRACK_RECHECK_AFTER`` seconds, the longest
unchecked first."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings, classify_allow_entry
from fptrack.crawler.guard import PrivateAddressPolicy
from fptrack.crawler.guarded_http import FetchFailure, FetchResult, GuardedFetcher, NoSuchHost
from fptrack.jobs.pipeline import INFRINGING_STATUSES
from fptrack.storage.db import session_scope
from fptrack.storage.fingerprints import id_chunks
from fptrack.storage.locks import drop_lock, holder_died, refresh_lock, take_lock
from fptrack.storage.models import Match, MonitorLock, Page, Site, TakedownCheck, utcnow
from fptrack.storage.sites import site_of

__all__ = [
    "LOCK_NAME",
    "RECHECKED_STATUSES",
    "PageVerdict",
    "RecheckError",
    "RecheckProgress",
    "RecheckSummary",
    "due_matches",
    "recheck_matches",
    "run_due_rechecks",
]

log = logging.getLogger(__name__)

LOCK_NAME = "recheck:takedowns"
RECHECKED_STATUSES = tuple(status.value for status in INFRINGING_STATUSES)
GONE_STATUSES = frozenset({404, 410, 451})
TAKEN_DOWN = frozenset({"gone", "removed"})


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
    """What a run of re-checks did: matches by outcome, pages fetched, matches newly taken down."""

    outcomes: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    newly_taken_down: int = 0
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
            "skipped": self.skipped,
        }


# ---------------------------------------------------------------------------------------------- what is due


def due_matches(
    session: Session, settings: Settings, *, now: datetime | None = None, limit: int | None = None
) -> list[int]:
    """Ids of the flagged and confirmed matches not re-checked for ``FPTRACK_RECHECK_AFTER`` seconds (never
    checked first, then the longest unchecked), at most ``limit`` (default ``FPTRACK_RECHECK_LIMIT``)."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=settings.recheck_after)
    never = select(Match.id).where(Match.status.in_(RECHECKED_STATUSES), Match.rechecked_at.is_(None))
    limit = settings.recheck_limit if limit is None else limit
    found = [int(i) for i in session.scalars(never.order_by(Match.id).limit(limit))]
    if len(found) < limit:
        stale = (
            select(Match.id)
            .where(Match.status.in_(RECHECKED_STATUSES), Match.rechecked_at < cutoff)
            .order_by(Match.rechecked_at, Match.id)
            .limit(limit - len(found))
        )
        found.extend(int(i) for i in session.scalars(stale))
    return found


# ------------------------------------------------------------------------------------------------ judging


def judge_response(
    session: Session,
    result: FetchResult,
    chapters: dict[int, int],
    *,
    fetched_at: datetime,
    template: Collection[int] = (),
) -> dict[int, tuple[str, str]]:
    """match id -> (outcome, detail) for a response of the page of matches ``chapters`` (match id -> chapter
    id): gone for 404/410/451, present or removed for a 200 (extracted and verified, ignoring ``template``,
    the site's template hashes when the page was compared without them), error otherwise."""
    if result.status in GONE_STATUSES:
        detail = f"HTTP {result.status}" + (
            " (unavailable for legal reasons)" if result.status == 451 else ""
        )
        return {match_id: ("gone", detail) for match_id in chapters}
    if result.status != 200:
        return {match_id: ("error", f"HTTP {result.status}") for match_id in chapters}
    from scrapy.http import Response

    from fptrack.compare.service import verify_chapters
    from fptrack.crawler.parse import parse_response
    from fptrack.fingerprint.pipeline import fingerprint_text

    response = Response(url=result.final_url, status=result.status, headers=result.headers, body=result.body)
    page = parse_response(response, requested_url=result.url, fetched_at=fetched_at).page
    if not page.text.strip():
        reason = page.error or "no text"
        return {match_id: ("removed", f"HTTP 200 without the copy: {reason}") for match_id in chapters}
    verdicts = verify_chapters(
        session, fingerprint_text(page.text), set(chapters.values()), ignored_codes=template
    )
    judged: dict[int, tuple[str, str]] = {}
    for match_id, chapter_id in chapters.items():
        verdict = verdicts.get(chapter_id)
        common = verdict.copied_chars if verdict is not None else 0
        if verdict is not None and verdict.flagged:
            judged[match_id] = (
                "present",
                f"still copies the chapter: {common} characters, score {verdict.score:.2f}",
            )
        else:
            judged[match_id] = (
                "removed",
                f"the page no longer copies the chapter ({common} characters in common)",
            )
    return judged


# ------------------------------------------------------------------------------------------------ running


@dataclass(frozen=True)
class _Target:
    page_id: int
    url: str
    chapters: dict[int, int]  # match id -> chapter id
    # the site whose template the page's matches were decided without (compare.templates), else None
    masked_by: int | None = None


def _targets(session: Session, match_ids: Sequence[int]) -> list[_Target]:
    pages: dict[int, _Target] = {}
    for chunk in id_chunks(match_ids):
        rows = session.execute(
            select(Match.id, Match.chapter_id, Page.id, Page.url, Page.site_id, Page.template_masked)
            .join(Page, Page.id == Match.page_id)
            .where(Match.id.in_(chunk))
        )  # fmt: skip
        for match_id, chapter_id, page_id, url, site_id, masked in rows:
            masked_by = int(site_id) if masked and site_id is not None else None
            target = pages.setdefault(int(page_id), _Target(int(page_id), str(url), {}, masked_by))
            target.chapters[int(match_id)] = int(chapter_id)
    missing = sorted(set(match_ids) - {m for t in pages.values() for m in t.chapters})
    if missing:
        shown = ", ".join(str(m) for m in missing[:10])
        raise RecheckError(f"no match with id {shown}; see `fptrack matches --status all`")
    return sorted(pages.values(), key=lambda t: t.page_id)


def _politeness(
    session: Session, settings: Settings, targets: Sequence[_Target]
) -> tuple[dict[str, tuple[float, bool]], list[str]]:
    """Per site key, (delay, obey robots) from the managed site's settings (else the global ones), and the
    private-address entries the sites allow (their ``allow_private`` setting)."""
    keys = sorted({site_of(t.url) for t in targets})
    rules: dict[str, tuple[float, bool]] = {}
    allowed: list[str] = []
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        for site in session.scalars(select(Site).where(Site.host.in_(chunk), Site.managed.is_(True))):
            delay = settings.crawl_delay if site.delay is None else float(site.delay)
            rules[site.host] = (delay, bool(site.obey_robots))
            if site.allow_private:
                hosts = [site_of(url) for url in site.start_urls or ()] + list(site.allowed_hosts or ())
                allowed.extend(classify_allow_entry(h)[1] for h in dict.fromkeys(hosts) if h)
    return rules, allowed


def _record(session: Session, verdicts: Sequence[PageVerdict], now: datetime) -> int:
    """Write the checks and the matches' latest state; returns how many matches were newly taken down."""
    newly = 0
    for verdict in verdicts:
        session.add(
            TakedownCheck(
                match_id=verdict.match_id, checked_at=now, outcome=verdict.outcome,
                http_status=verdict.http_status, detail=verdict.detail[:2000],
            )
        )  # fmt: skip
        values: dict[str, object] = {"rechecked_at": now, "recheck_state": verdict.outcome}
        if verdict.outcome == "present":
            values["taken_down_at"] = None
        statement = update(Match).where(Match.id == verdict.match_id).values(**values)
        session.execute(statement)
        if verdict.outcome in TAKEN_DOWN:
            result = session.execute(
                update(Match)
                .where(Match.id == verdict.match_id, Match.taken_down_at.is_(None))
                .values(taken_down_at=now)
            )
            newly += int(result.rowcount or 0)  # type: ignore[attr-defined]
    session.flush()
    return newly


def recheck_matches(
    settings: Settings,
    sessions: sessionmaker[Session],
    match_ids: Collection[int],
    *,
    allow_private_hosts: Sequence[str] = (),
    progress: Callable[[RecheckProgress], None] | None = None,
    heartbeat: Callable[[], None] | None = None,
    fetcher: GuardedFetcher | None = None,
) -> RecheckSummary:
    """Re-check the pages of ``match_ids`` now (one fetch per page), recording each match's outcome (see the
    module docstring). :class:`RecheckError` for an unknown id, before anything is fetched."""
    summary = RecheckSummary()
    ids = sorted({int(m) for m in match_ids})
    if not ids:
        return summary
    with session_scope(sessions) as session:
        targets = _targets(session, ids)
        rules, site_allowed = _politeness(session, settings, targets)
    if fetcher is None:
        policy = PrivateAddressPolicy.from_entries(
            (*settings.allow_private_hosts, *site_allowed, *allow_private_hosts)
        )

        def politeness(key: str) -> tuple[float, bool]:
            return rules.get(key, (settings.crawl_delay, settings.crawl_obey_robots))

        fetcher = GuardedFetcher(settings, policy, politeness)
    templates: dict[int, frozenset[int]] = {}  # site id -> its template, decided once per run
    for done, target in enumerate(targets, start=1):
        now = utcnow()
        status: int | None = None
        try:
            result = fetcher.fetch(target.url)
        except NoSuchHost as error:
            judged = {m: ("gone", str(error)) for m in target.chapters}
        except FetchFailure as error:
            judged = {m: ("error", str(error)) for m in target.chapters}
        else:
            status = result.status
            with session_scope(sessions) as session:
                template = _template_of(session, target, templates) if result.status == 200 else frozenset()
                judged = judge_response(session, result, target.chapters, fetched_at=now, template=template)
        verdicts = [
            PageVerdict(m, outcome, status, detail) for m, (outcome, detail) in sorted(judged.items())
        ]
        with session_scope(sessions) as session:
            summary.newly_taken_down += _record(session, verdicts, now)
        summary.pages += 1
        summary.outcomes.update(v.outcome for v in verdicts)
        if heartbeat is not None:
            heartbeat()
        if progress is not None:
            progress(RecheckProgress(done, len(targets), target.url, tuple(v.outcome for v in verdicts)))
    return summary


def _template_of(session: Session, target: _Target, templates: dict[int, frozenset[int]]) -> frozenset[int]:
    """The template hashes to ignore on ``target``: its site's (decided once per run, kept in ``templates``)
    when its matches were decided without them, else none."""
    if target.masked_by is None:
        return frozenset()
    if target.masked_by not in templates:
        from fptrack.compare.templates import site_template

        templates[target.masked_by] = site_template(session, target.masked_by)
    return templates[target.masked_by]


# --------------------------------------------------------------------------------------------- the claim


def _claim(session: Session, settings: Settings, now: datetime) -> str | None:
    """Take ``recheck:takedowns`` (a dead holder's claim is taken over); the token, or None when a live run
    holds it."""
    held = session.get(MonitorLock, LOCK_NAME, with_for_update=True)
    if held is not None:
        if not holder_died(held, now - timedelta(seconds=settings.crawl_stale_seconds)):
            return None
        log.warning("taking over the claim %s of a re-check run that died (%s)", LOCK_NAME, held.owner)
        drop_lock(session, LOCK_NAME, held.token)
    return take_lock(session, LOCK_NAME, now)


def run_due_rechecks(
    settings: Settings,
    sessions: sessionmaker[Session],
    *,
    progress: Callable[[RecheckProgress], None] | None = None,
) -> RecheckSummary:
    """Re-check the matches that are due, holding the ``recheck:takedowns`` claim (skipped when another run
    holds it)."""
    with session_scope(sessions) as session:
        token = _claim(session, settings, utcnow())
    if token is None:
        return RecheckSummary(skipped="another takedown re-check run is under way")

    def heartbeat() -> None:
        with session_scope(sessions) as session:
            refresh_lock(session, LOCK_NAME, token)

    try:
        with session_scope(sessions) as session:
            due = due_matches(session, settings)
        return recheck_matches(settings, sessions, due, progress=progress, heartbeat=heartbeat)
    finally:
        with session_scope(sessions) as session:
            drop_lock(session, LOCK_NAME, token)
