"""``/sites``: the monitored sites (schedule, next crawl, last crawl), their crawls; for admins, a form to add
and edit a site and a "run now" button.

The rules are :mod:`jobs.sites`' (``SiteSpec.validated``, ``add_site``, ``edit_site``), the same as ``fptrack
sites add|edit``: this module only turns form fields into a :class:`~jobs.sites.SiteSpec` and shows the
one-line :class:`~jobs.sites.SiteError` next to the form. "Run now" starts the crawl exactly as the scheduler
does (:func:`jobs.site_runs.spawn_site_crawl`: ``python -m fptrack.jobs.site_crawl NAME`` in a process of its
own, which claims the site, so a site is never crawled twice at once) and answers at once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.views.crawls import CrawlRow, crawl_rows
from fptrack.admin.views.read_sessions import read_session
from fptrack.crawler.pages import RENDER_JS_MODES
from fptrack.jobs.sites import SiteError, SiteSpec, add_site, edit_site, remove_site, site_lock_name, spec_of
from fptrack.storage.locks import drop_lock, take_lock
from fptrack.storage.models import CrawlJob, MonitorLock, Site, as_utc, utcnow

__all__ = ["SiteRow", "blueprint", "site_rows", "spec_from_form"]

blueprint = Blueprint("sites", __name__, url_prefix="/sites")
SITE_CRAWLS = 50


@dataclass(frozen=True)
class SiteRow:
    id: int
    name: str
    host: str
    enabled: bool
    schedule: str
    next_crawl_at: datetime | None
    last_crawled_at: datetime | None
    last_status: str
    last_error: str
    running: bool


def site_rows(session: Session) -> list[SiteRow]:
    """Every monitored site by name, with its latest crawl's status and whether a crawl holds it now."""
    latest = (
        select(CrawlJob.site_id, func.max(CrawlJob.id).label("job_id"))
        .where(CrawlJob.site_id.is_not(None))
        .group_by(CrawlJob.site_id)
        .subquery("latest")
    )
    query = (
        select(Site, CrawlJob.status, CrawlJob.error, CrawlJob.started_at)
        .outerjoin(latest, latest.c.site_id == Site.id)
        .outerjoin(CrawlJob, CrawlJob.id == latest.c.job_id)
        .where(Site.managed.is_(True))
        .order_by(Site.name)
    )
    running = set(session.scalars(select(MonitorLock.name)))
    return [
        SiteRow(
            id=site.id,
            name=site.name,
            host=site.host,
            enabled=site.enabled,
            schedule=site.schedule,
            next_crawl_at=site.next_crawl_at,
            last_crawled_at=started or site.last_crawled_at,
            last_status=status or "",
            last_error=error or "",
            running=site_lock_name(site.id) in running,
        )
        for site, status, error, started in session.execute(query)
    ]


def _lines(name: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in request.form.get(name, "").splitlines() if line.strip())


def _optional_number(name: str, kind: type[int | float], what: str) -> Any:
    raw = request.form.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise SiteError(f"{name.replace('_', ' ')}: expected {what}, got {raw!r}") from None


def spec_from_form() -> SiteSpec:
    """The site the form describes (not yet validated: :mod:`jobs.sites` does that); :class:`SiteError` for a
    field that is not even a number."""
    depth = _optional_number("depth", int, "a whole number")
    max_pages = _optional_number("max_pages", int, "a whole number")
    return SiteSpec(
        name=request.form.get("name", ""),
        start_urls=_lines("start_urls"),
        allowed_hosts=_lines("allowed_hosts"),
        depth=2 if depth is None else depth,
        max_pages=200 if max_pages is None else max_pages,
        include=_lines("include"),
        exclude=_lines("exclude"),
        schedule=request.form.get("schedule", ""),
        rate=_optional_number("rate", float, "a number of requests per second"),
        delay=_optional_number("delay", float, "a number of seconds"),
        concurrency=_optional_number("concurrency", int, "a whole number"),
        obey_robots="obey_robots" in request.form,
        render_js=request.form.get("render_js", "auto"),
        allow_private="allow_private" in request.form,
        enabled="enabled" in request.form,
    )


def _managed_site(session: Session, site_id: int) -> Site:
    site = session.get(Site, site_id)
    if site is None or not site.managed:
        abort(404, description=gettext("There is no monitored site with id %(id)s.", id=site_id))
    return site


def _form(spec: SiteSpec, *, site: Site | None = None, error: str = "", status: int = 200) -> tuple[str, int]:
    return render_template(
        "site_form.html", spec=spec, site=site, error=error, render_js_modes=RENDER_JS_MODES
    ), status


@blueprint.get("")
def index() -> str:
    return render_template("sites.html", sites=site_rows(read_session()))


@blueprint.get("/new")
@requires_role("admin")
def new() -> ResponseReturnValue:
    return _form(SiteSpec(name="", start_urls=()))


@blueprint.post("")
@requires_role("admin")
def add() -> ResponseReturnValue:
    session = db_session()
    try:
        spec = spec_from_form()
    except SiteError as error:
        return _form(
            SiteSpec(name=request.form.get("name", ""), start_urls=_lines("start_urls")),
            error=str(error),
            status=400,
        )
    try:
        site = add_site(session, spec, tick=admin_state().settings.schedule_every)
    except SiteError as error:
        session.rollback()
        return _form(spec, error=str(error), status=400)
    session.commit()
    flash(gettext("Monitoring %(name)s (%(host)s).", name=site.name, host=site.host))
    return redirect(url_for("sites.detail", site_id=site.id), code=303)


@blueprint.get("/<int:site_id>")
def detail(site_id: int) -> str:
    session = read_session()
    site = _managed_site(session, site_id)
    crawls: list[CrawlRow] = crawl_rows(session, limit=SITE_CRAWLS, site_id=site_id)
    running = session.get(MonitorLock, site_lock_name(site_id)) is not None
    return render_template(
        "site.html", site=site, spec=spec_of(site), crawls=crawls, running=running, limit=SITE_CRAWLS
    )


@blueprint.get("/<int:site_id>/edit")
@requires_role("admin")
def edit_form(site_id: int) -> ResponseReturnValue:
    site = _managed_site(db_session(), site_id)
    return _form(spec_of(site), site=site)


@blueprint.post("/<int:site_id>")
@requires_role("admin")
def edit(site_id: int) -> ResponseReturnValue:
    session = db_session()
    site = _managed_site(session, site_id)
    try:
        spec = spec_from_form()
    except SiteError as error:
        return _form(spec_of(site), site=site, error=str(error), status=400)
    try:
        changes = {name: getattr(spec, name) for name in SiteSpec.__dataclass_fields__ if name != "extra"}
        edited = edit_site(session, site.name, tick=admin_state().settings.schedule_every, **changes)
    except SiteError as error:
        session.rollback()
        return _form(spec, site=_managed_site(session, site_id), error=str(error), status=400)
    session.commit()
    flash(gettext("Saved %(name)s.", name=edited.name))
    return redirect(url_for("sites.detail", site_id=site_id), code=303)


STARTING_SECONDS = 60
"""How long a "run now" counts as beginning: from the click until its crawl's process claims the site (within
seconds). A second click meanwhile is refused, not a second crawl."""


def _mark_starting(session: Session, site_id: int) -> str | None:
    """Record that a crawl of the site is being started (:func:`jobs.site_runs.start_mark_name`: the crawl
    removes the mark when it claims the site); None when one was started less than
    :data:`STARTING_SECONDS` ago and has not claimed the site yet. An older mark (its crawl never began) is
    replaced."""
    from fptrack.jobs.site_runs import start_mark_name

    now = utcnow()
    mark = session.get(MonitorLock, start_mark_name(site_id))
    if mark is not None:
        if as_utc(mark.acquired_at) > now - timedelta(seconds=STARTING_SECONDS):
            return None
        session.delete(mark)
        session.flush()
    return take_lock(session, start_mark_name(site_id), now)


@blueprint.post("/<int:site_id>/run")
@requires_role("admin")
def run_now(site_id: int) -> ResponseReturnValue:
    from fptrack.jobs.site_runs import spawn_site_crawl, start_mark_name

    session = db_session()
    site = _managed_site(session, site_id)
    if not site.start_urls:
        abort(400, description=f"Site {site.name} has no start URL; edit it first.")
    holder = session.get(MonitorLock, site_lock_name(site_id))
    if holder is not None:
        flash(
            gettext("%(name)s is being crawled already (crawl #%(id)s).", name=site.name, id=holder.job_id)
            if holder.job_id
            else gettext("%(name)s is being crawled already.", name=site.name)
        )
        return redirect(url_for("sites.detail", site_id=site_id), code=303)
    token = _mark_starting(session, site_id)
    if token is None:
        flash(gettext("A crawl of %(name)s was started a moment ago and is beginning.", name=site.name))
        return redirect(url_for("sites.detail", site_id=site_id), code=303)
    session.commit()
    try:
        spawn_site_crawl(site.id, site.name, settings=admin_state().settings, scheduled=False)
    except OSError as error:
        drop_lock(session, start_mark_name(site_id), token)
        session.commit()
        abort(503, description=f"Cannot start the crawl: {error}")
    flash(gettext("Started a crawl of %(name)s; it appears below as soon as it has begun.", name=site.name))
    return redirect(url_for("sites.detail", site_id=site_id), code=303)


@blueprint.post("/<int:site_id>/remove")
@requires_role("admin")
def remove(site_id: int) -> ResponseReturnValue:
    """Stop monitoring the site (``fptrack sites remove``): its pages, matches and crawls stay."""
    session = db_session()
    site = remove_site(session, _managed_site(session, site_id).name)
    session.commit()
    flash(gettext("Stopped monitoring %(name)s; its pages, matches and crawls are kept.", name=site.name))
    return redirect(url_for("sites.index"), code=303)
