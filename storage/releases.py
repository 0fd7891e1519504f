"""Releases: when a work's new chapters came out (``releases``), the feeds they are read from
(``release_feeds``), and the sites that copied a work before (the ones to visit sooner after a release).
The pacing that rests on them is :mod:`jobs.releases`."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, literal, select, union, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import CompoundSelect

from fptrack.storage.models import (
    Match,
    MatchStatus,
    Page,
    Release,
    ReleaseFeed,
    Site,
    as_utc,
    utcnow,
)

__all__ = [
    "ReleaseActivity",
    "copier_sites",
    "due_feeds",
    "hasten_sites",
    "record_release",
    "release_activity",
    "set_feed",
]

# a copy dismissed by a reviewer, or on a licensed site, says nothing of where the next chapter is pirated
_COPYING = (MatchStatus.FLAGGED.value, MatchStatus.CONFIRMED.value)


@dataclass(frozen=True)
class ReleaseActivity:
    """The releases of the works a site copied: the latest one (not after now), how many since a time, and
    whether the site has copied the work since that release (``reposted``)."""

    latest: datetime
    count: int
    reposted: bool = False


def record_release(
    session: Session,
    work_id: int,
    *,
    released_at: datetime,
    source: str,
    ref: str,
    new_work_id: int | None = None,
) -> bool:
    """Record that ``work_id`` had a release at ``released_at``, once per ``(work_id, ref)``; False when that
    release was recorded already."""
    known = session.scalar(select(Release.id).where(Release.work_id == work_id, Release.ref == ref[:2048]))
    if known is not None:
        return False
    session.add(
        Release(
            work_id=work_id,
            released_at=as_utc(released_at),
            source=source,
            ref=ref[:2048],
            new_work_id=new_work_id,
            recorded_at=utcnow(),
        )
    )
    session.flush()
    return True


def _series(work_id: int) -> CompoundSelect[tuple[int]]:
    """``work_id`` and the works registered as its releases (their new chapters)."""
    return union(
        select(literal(work_id)),
        select(Release.new_work_id).where(Release.work_id == work_id, Release.new_work_id.is_not(None)),
    )


def copier_sites(session: Session, work_id: int) -> list[int]:
    """Ids of the monitored sites (enabled, on an interval schedule) holding a page that copies ``work_id``
    or one of its released chapters (a flagged or confirmed match)."""
    rows = session.scalars(
        select(Site.id)
        .where(
            Site.managed.is_(True),
            Site.enabled.is_(True),
            Site.schedule != "",
            Site.id.in_(
                select(Page.site_id)
                .join(Match, Match.page_id == Page.id)
                .where(Match.work_id.in_(_series(work_id)), Match.status.in_(_COPYING))
            ),
        )
        .order_by(Site.id)
    )
    return [int(site_id) for site_id in rows]


def hasten_sites(session: Session, site_ids: Collection[int], at: datetime) -> int:
    """Bring the next crawl of ``site_ids`` forward to ``at`` where it was due later; how many moved. Only
    interval schedules: a cron schedule is kept as written."""
    if not site_ids:
        return 0
    moved = 0
    for site_id, schedule, due in session.execute(
        select(Site.id, Site.schedule, Site.next_crawl_at).where(Site.id.in_(list(site_ids)))
    ):
        if not str(schedule).isdigit() or (due is not None and as_utc(due) <= at):
            continue
        session.execute(update(Site).where(Site.id == site_id).values(next_crawl_at=at))
        moved += 1
    session.flush()
    return moved


def release_activity(
    session: Session, site_ids: Collection[int], *, since: datetime, now: datetime
) -> dict[int, ReleaseActivity]:
    """Per site of ``site_ids`` that copied a released work (or one of its released chapters): its latest
    release at or before ``now``, the number of its releases from ``since`` to ``now``, and whether the site
    has copied that work since its latest release (a match of the work, or of one of its chapters, first seen
    after it: the site has reposted). Sites without any release are left out."""
    if not site_ids:
        return {}
    copies = session.execute(
        select(Page.site_id, Match.work_id, func.max(Match.first_seen))
        .join(Match, Match.page_id == Page.id)
        .where(Page.site_id.in_(list(site_ids)), Match.status.in_(_COPYING))
        .group_by(Page.site_id, Match.work_id)
    ).all()
    works = {int(work_id) for _, work_id, _ in copies}
    # a copy of a released chapter (a work registered with --release-of) counts as a copy of its work
    head = {
        int(chapter or 0): int(work)
        for chapter, work in session.execute(
            select(Release.new_work_id, Release.work_id).where(Release.new_work_id.in_(works))
        )
    }
    released: dict[int, list[datetime]] = {}
    for work_id, at in session.execute(
        select(Release.work_id, Release.released_at).where(
            Release.work_id.in_(works | set(head.values())),
            Release.released_at >= since,
            Release.released_at <= now,
        )
    ):
        released.setdefault(int(work_id), []).append(as_utc(at))
    last_copy: dict[tuple[int, int], datetime] = {}  # (site, head work) -> its latest copy's first sighting
    for site_id, work_id, seen in copies:
        key = (int(site_id or 0), head.get(int(work_id), int(work_id)))
        if seen is not None and (key not in last_copy or as_utc(seen) > last_copy[key]):
            last_copy[key] = as_utc(seen)
    activity: dict[int, ReleaseActivity] = {}
    for site_id in {site for site, _ in last_copy}:
        heads = [h for s, h in last_copy if s == site_id and h in released]
        if not heads:
            continue
        latest_head = max(heads, key=lambda h: max(released[h]))
        latest = max(released[latest_head])
        count = sum(len(released[h]) for h in heads)
        activity[site_id] = ReleaseActivity(latest, count, last_copy[(site_id, latest_head)] >= latest)
    return activity


def set_feed(session: Session, work_id: int, url: str) -> None:
    """Read ``work_id``'s releases from the feed at ``url`` (read at the next look); ``''`` stops it."""
    feed = session.get(ReleaseFeed, work_id)
    if not url:
        if feed is not None:
            session.delete(feed)
    elif feed is None:
        session.add(ReleaseFeed(work_id=work_id, url=url, next_check_at=None, error=""))
    elif feed.url != url:
        feed.url, feed.next_check_at, feed.error = url, None, ""
    session.flush()


def due_feeds(session: Session, now: datetime) -> list[ReleaseFeed]:
    """The release feeds due for a read (never read, or their next read has come), the earliest first."""
    return list(
        session.scalars(
            select(ReleaseFeed)
            .where((ReleaseFeed.next_check_at.is_(None)) | (ReleaseFeed.next_check_at <= now))
            .order_by(ReleaseFeed.next_check_at.is_not(None), ReleaseFeed.next_check_at, ReleaseFeed.work_id)
        )
    )
