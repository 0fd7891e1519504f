"""Release pacing: the sites that copied a work are crawled at a quicker pace for a while after the work has a
new chapter out, and more slowly than their schedule the rest of the time, so that their crawls per day stay
those of their schedule.

Pirates repost a chapter within minutes of its release; a site crawled on a 2-minute schedule finds it 90 s
later on average (issue 37). The product knows when the publisher releases: a new chapter registered as a
release of a work (``fptrack works add FILE --release-of WORK``, :func:`release_work`) or an entry of the
work's release feed (RSS, Atom or JSON, read on the scheduler's beat through the guarded HTTP client:
:func:`read_due_feeds`). Then:

- **the window**: for ``FPTRACK_RELEASE_WINDOW`` seconds after a release (an hour), every monitored site that
  copied the work (a flagged or confirmed match, :func:`storage.releases.copier_sites`) is crawled every
  ``FPTRACK_RELEASE_EVERY`` seconds (30), its first crawl that long after the release, until it has reposted
  (a copy of the work first seen after the release: nothing more to wait for). Its crawls are the
  incremental ones (listings read with conditional requests, only new links followed), so a quicker pace costs
  few requests;
- **the back-off**: outside its windows such a site is crawled ``stretch`` times its schedule
  (:func:`quiet_stretch`), where ``stretch`` pays for the window crawls of the releases it saw in the last
  week: with ``r`` releases a day, ``W`` the window, ``E`` the release pace and ``S`` the schedule, a day
  holds ``r W / E`` window crawls, and the ``86400 - r W`` seconds left get the ``86400 / S - r W / E``
  crawls left of the schedule's budget. One release a day on a 2-minute schedule: 120 crawls in the window,
  the rest of the day every 138 s (720 crawls a day either way). When the windows alone spend the budget
  (six releases a day on that schedule) the stretch stops at ``FPTRACK_SCHEDULE_BACKOFF_MAX`` and the budget
  is exceeded, the price of finding those copies early.

The pacing is a factor on the site's interval schedule (:func:`pace_factor`), taken by the scheduler's
:func:`jobs.sites.due_sites` as its quiet-site back-off is; cron schedules are kept as written.
``FPTRACK_RELEASE_WINDOW=0`` switches it off. Same code in-process and on workers: the beat's
``fptrack.start_due_crawls`` reads the due feeds, then takes the due sites."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import lxml.etree
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.errors import FptrackError
from fptrack.core.settings import Settings
from fptrack.crawler.guarded_http import FetchFailure, FetchResult
from fptrack.storage.db import session_scope
from fptrack.storage.models import ReleaseFeed, as_utc, utcnow
from fptrack.storage.releases import copier_sites, due_feeds, hasten_sites, record_release

__all__ = [
    "LOOKBACK",
    "FeedEntry",
    "FeedError",
    "ReleasePace",
    "Released",
    "pace_factor",
    "parse_feed",
    "quiet_stretch",
    "read_due_feeds",
    "release_work",
]

log = logging.getLogger(__name__)

LOOKBACK = timedelta(days=7)
"""The releases a site's back-off is sized on: those of the last week."""
_DAY = 86400.0
_MAX_ENTRIES = 500  # entries read from one feed at most (the newest come first in every format seen)


class FeedError(FptrackError, ValueError):
    """A release feed that cannot be read (not RSS, Atom or JSON); the message says why, in one line."""


@dataclass(frozen=True)
class ReleasePace:
    """The release pacing settings (module docstring): ``window`` and ``every`` in seconds, ``tick`` the
    scheduler's period (no pace is quicker), ``backoff_max`` the most a schedule is stretched."""

    window: float = 3600.0
    every: float = 30.0
    tick: float = 30.0
    backoff_max: float = 4.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ReleasePace:
        return cls(
            window=settings.release_window,
            every=settings.release_every,
            tick=settings.schedule_every,
            backoff_max=settings.schedule_backoff_max,
        )

    @property
    def on(self) -> bool:
        return self.window > 0


def quiet_stretch(schedule: float, releases_per_day: float, pace: ReleasePace) -> float:
    """How many times its ``schedule`` (seconds) a site is crawled outside its release windows so that, with
    ``releases_per_day`` windows of ``pace.window`` seconds crawled every ``pace.every``, its crawls per day
    stay ``86400 / schedule`` (module docstring); 1 with no releases, at most ``pace.backoff_max``."""
    if not pace.on or releases_per_day <= 0 or schedule <= 0:
        return 1.0
    quick = min(schedule, max(pace.every, pace.tick))
    windowed = min(_DAY, releases_per_day * pace.window)
    rest = _DAY - windowed
    left = _DAY / schedule - windowed / quick  # crawls of the budget left for the time outside windows
    most = max(1.0, pace.backoff_max)
    if rest <= 0 or left * schedule * most <= rest:
        return most
    return min(most, max(1.0, rest / (left * schedule)))


def pace_factor(
    schedule: float,
    now: datetime,
    latest_release: datetime | None,
    releases_since_lookback: int,
    pace: ReleasePace,
    *,
    reposted: bool = False,
) -> float:
    """The factor on a site's interval ``schedule`` (seconds) at ``now``: ``pace.every / schedule`` within
    ``pace.window`` of its latest release (never above 1) until the site has ``reposted`` (copied the work
    since), else :func:`quiet_stretch` of its releases of the last :data:`LOOKBACK`; 1 for a site that copied
    no released work."""
    if not pace.on or latest_release is None or schedule <= 0:
        return 1.0
    if not reposted and now - as_utc(latest_release) < timedelta(seconds=pace.window):
        return min(1.0, max(pace.every, pace.tick) / schedule)
    per_day = releases_since_lookback / (LOOKBACK.total_seconds() / _DAY)
    return quiet_stretch(schedule, per_day, pace)


@dataclass(frozen=True)
class Released:
    """What :func:`release_work` did: ``recorded`` (False: that release was known already) and the ids of the
    sites whose next crawl it brought forward (none once the release's window has passed)."""

    recorded: bool
    sites: list[int]


def release_work(
    session: Session,
    work_id: int,
    *,
    released_at: datetime,
    source: str,
    ref: str,
    pace: ReleasePace,
    new_work_id: int | None = None,
    now: datetime | None = None,
) -> Released:
    """Record a release of ``work_id`` and, while its window is open, bring the next crawl of the sites that
    copied it to ``pace.every`` seconds after the release (not before now)."""
    now = now or utcnow()
    released_at = min(as_utc(released_at), now)  # a date in the future is taken as now
    if not record_release(
        session, work_id, released_at=released_at, source=source, ref=ref, new_work_id=new_work_id
    ):
        return Released(recorded=False, sites=[])
    if not pace.on or now - released_at >= timedelta(seconds=pace.window):
        return Released(recorded=True, sites=[])
    sites = copier_sites(session, work_id)
    first = max(now, released_at + timedelta(seconds=max(pace.every, pace.tick)))
    hasten_sites(session, sites, first)
    return Released(recorded=True, sites=sites)


# ------------------------------------------------------------------------------------------------- feeds


@dataclass(frozen=True)
class FeedEntry:
    """One entry of a release feed: ``ref`` identifies it (its id, else its link, else its title) and
    ``published`` is its date (None when the feed gives none)."""

    ref: str
    published: datetime | None


def _date(value: str | None) -> datetime | None:
    text = (value or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _json_entries(data: object) -> list[FeedEntry]:
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise FeedError("a JSON release feed is a JSON Feed ({'items': [...]}) or a list of entries")
    entries = []
    for item in items[:_MAX_ENTRIES]:
        if not isinstance(item, dict):
            continue
        ref = next((str(item[k]) for k in ("id", "url", "link", "title") if item.get(k)), "")
        date = next(
            (item[k] for k in ("date_published", "published", "released_at", "date") if item.get(k)), None
        )
        if ref:
            entries.append(FeedEntry(ref, _date(str(date)) if date is not None else None))
    return entries


def _local(tag: object) -> str:
    return str(tag).rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _xml_entries(body: bytes) -> list[FeedEntry]:
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, recover=False, huge_tree=False)
    try:
        root = lxml.etree.fromstring(body, parser)
    except lxml.etree.XMLSyntaxError as error:
        raise FeedError(f"not RSS, Atom or JSON ({error})") from None
    entries = []
    for node in root.iter():
        if _local(node.tag) not in ("item", "entry"):
            continue
        fields: dict[str, str] = {}
        for child in node:
            name = _local(child.tag)
            value = (child.get("href") if name == "link" and child.get("href") else child.text) or ""
            fields.setdefault(name, value.strip())
        ref = next((fields[k] for k in ("guid", "id", "link", "title") if fields.get(k)), "")
        date = next((fields[k] for k in ("pubdate", "published", "date", "updated") if fields.get(k)), None)
        if ref:
            entries.append(FeedEntry(ref, _date(date)))
        if len(entries) >= _MAX_ENTRIES:
            break
    if not entries and _local(root.tag) not in ("rss", "feed", "rdf"):
        raise FeedError(f"not RSS, Atom or JSON (the document is <{_local(root.tag)}>)")
    return entries


def parse_feed(body: bytes) -> list[FeedEntry]:
    """The entries of a release feed: RSS 2.0 (``item``: ``guid``/``link``, ``pubDate``), Atom (``entry``:
    ``id``, ``published``/``updated``), RSS 1.0, JSON Feed (``items``: ``id``/``url``, ``date_published``)
    or a JSON list of such objects (``released_at`` accepted). :class:`FeedError` for anything else."""
    text = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"{", b"["):
        try:
            return _json_entries(json.loads(text))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise FeedError(f"not valid JSON ({error})") from None
    return _xml_entries(text)


def read_due_feeds(
    settings: Settings,
    sessions: sessionmaker[Session],
    *,
    fetch: Callable[[str], FetchResult] | None = None,
    now: datetime | None = None,
) -> dict[str, int]:
    """Read every release feed that is due (``FPTRACK_RELEASE_FEED_EVERY`` after its last read) and record
    its new entries as releases of its work (:func:`release_work`; an entry without a date is released when
    first read). ``fetch`` defaults to the guarded, polite client of the takedown re-checks (the
    private-address guard, robots.txt, the site's pace). A feed that fails keeps its error and is read again
    at its next turn. Returns counts: feeds read, failed, releases recorded, sites brought forward."""
    now = now or utcnow()
    pace = ReleasePace.from_settings(settings)
    fetch = fetch or _guarded_fetch(settings, sessions)
    counts = {"feeds": 0, "failed": 0, "releases": 0, "sites": 0}
    with session_scope(sessions) as session:
        due = [(feed.work_id, feed.url) for feed in due_feeds(session, now)]
    for work_id, url in due:
        error, entries = "", []
        try:
            result = fetch(url)
            if result.status != 200:
                raise FeedError(f"HTTP {result.status}")
            entries = parse_feed(result.body)
        except (FetchFailure, FeedError) as failure:
            error = f"{url}: {failure}"
            log.warning("release feed of work #%d not read: %s", work_id, error)
        with session_scope(sessions) as session:
            feed = session.get(ReleaseFeed, work_id)
            if feed is None or feed.url != url:
                continue  # removed or changed meanwhile
            hastened: set[int] = set()
            for entry in entries:
                released = release_work(
                    session, work_id, released_at=entry.published or now, source="feed", ref=entry.ref,
                    pace=pace, now=now,
                )  # fmt: skip
                counts["releases"] += released.recorded
                hastened.update(released.sites)
            feed.checked_at, feed.error = now, error
            feed.next_check_at = now + timedelta(seconds=settings.release_feed_every)
            counts["sites"] += len(hastened)
        counts["failed" if error else "feeds"] += 1
    return counts


def _guarded_fetch(settings: Settings, sessions: sessionmaker[Session]) -> Callable[[str], FetchResult]:
    from fptrack.crawler.guard import PrivateAddressPolicy
    from fptrack.crawler.guarded_http import GuardedFetcher
    from fptrack.storage.pacing import Pacer

    policy = PrivateAddressPolicy.from_entries(settings.allow_private_hosts)
    pacer = Pacer(None if settings.is_sqlite else sessions, settings)
    fetcher = GuardedFetcher(
        settings, policy, lambda _key: (settings.crawl_delay, settings.crawl_obey_robots), pacer=pacer
    )
    return fetcher.fetch
