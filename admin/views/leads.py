"""``/leads``: cloud-drive share links found on crawled pages (:mod:`storage.leads`), filtered by work,
platform and state. Everyone may read; confirming or dismissing a lead is a reviewer's."""

from __future__ import annotations

from flask import Blueprint, abort, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import db_session
from fptrack.admin.views.read_sessions import read_session
from fptrack.crawler.leads import PLATFORMS
from fptrack.services.queries import work_choices
from fptrack.storage.leads import LeadError, list_leads, review_lead
from fptrack.storage.models import LEAD_STATES

__all__ = ["blueprint"]

blueprint = Blueprint("leads", __name__, url_prefix="/leads")
LIMIT = 500


@blueprint.get("")
def index() -> ResponseReturnValue:
    work = request.args.get("work", "").strip()
    platform = request.args.get("platform", "").strip()
    state = request.args.get("state", "").strip()
    if work and not work.isdigit():
        abort(400, description="work must be a work id")
    if platform and platform not in PLATFORMS:
        abort(400, description="unknown platform")
    if state and state not in LEAD_STATES:
        abort(400, description="unknown state")
    session = read_session()
    leads = list_leads(
        session, work_id=int(work) if work else None, platform=platform or None, state=state or None
    )
    return render_template(
        "leads.html",
        leads=leads[:LIMIT],
        limit=LIMIT,
        total=len(leads),
        filters={"work": work, "platform": platform, "state": state},
        works=work_choices(session),
        platforms=PLATFORMS,
        states=LEAD_STATES,
    )


@blueprint.post("/<int:lead_id>/<decision>")
@requires_role("reviewer")
def decide(lead_id: int, decision: str) -> ResponseReturnValue:
    states = {"confirm": "confirmed", "dismiss": "dismissed", "reopen": "new"}
    if decision not in states:
        abort(404)
    session = db_session()
    try:
        review_lead(session, lead_id, states[decision], by=str(getattr(current_user, "username", "")))
    except LeadError:
        abort(404)
    session.commit()
    return redirect(url_for("leads.index") + f"#lead-{lead_id}", code=303)
