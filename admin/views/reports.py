"""``/reports``: the sites with matches (with their takedown notices) and evidence bundles per match.

``/reports/notice?host=...`` (and ``.pdf``) previews the takedown notice of a site's *confirmed* matches as
:mod:`jobs.notices` drafts it (sender: the only one there is, or ``?sender_id=``; ``?lang=zh|en``), with
what it still lacks; keeping it as a draft, sending it and following it up are ``/notices``. Notices are for
reviewers and admins only, and for confirmed matches only (``?status=`` other than ``confirmed`` is a 400).
"""

from __future__ import annotations

from flask import Blueprint, Response, abort, render_template, request, url_for
from flask_babel import gettext

from fptrack.admin.security import requires_role
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.views.notices import notice_document, pdf_response
from fptrack.admin.views.read_sessions import read_session
from fptrack.analytics.rollups import match_rollup
from fptrack.jobs.notice_render import NavLink
from fptrack.jobs.notices import NoticeError, preview_notice
from fptrack.services.evidence.bundle import BundleError, build_bundle
from fptrack.storage.models import NOTICE_LANGUAGES, Match, Notice, Sender

__all__ = ["blueprint"]

blueprint = Blueprint("reports", __name__)


@blueprint.get("/reports")
def index() -> str:
    return render_template("reports.html", hosts=match_rollup(read_session(), "host"))


def _preview() -> Notice:
    """The notice the query asks for, as a draft would be made now (not kept)."""
    host = (request.args.get("host") or "").strip().lower()
    if not host or len(host) > 255:
        abort(400, description="Name the site: ?host=example.com (as in the matches' site column).")
    status = (request.args.get("status") or "confirmed").strip()
    if status != "confirmed":
        abort(400, description="A takedown notice names confirmed matches only: review the others first.")
    language = request.args.get("lang") or None
    if language is not None and language not in NOTICE_LANGUAGES:
        abort(400, description=f"lang must be one of {', '.join(NOTICE_LANGUAGES)}.")
    session = db_session()
    sender = None
    if request.args.get("sender_id"):
        sender = session.get(Sender, request.args.get("sender_id", type=int) or 0)
        if sender is None:
            abort(400, description="There is no such sender.")
    try:
        return preview_notice(session, host=host, sender=sender, language=language)
    except NoticeError as error:
        abort(404, description=str(error)[:1].upper() + str(error)[1:] + ".")


@blueprint.get("/reports/notice")
@requires_role("reviewer")
def notice() -> str:
    preview = _preview()
    nav = [
        NavLink(str(gettext("← Reports")), url_for("reports.index")),
        NavLink(
            str(gettext("Keep as a draft (with evidence bundles)")),
            url_for("notices.index", host=preview.host),
            "draft",
        ),
        NavLink(
            str(gettext("Download as PDF")),
            url_for(
                "reports.notice_pdf",
                host=preview.host,
                lang=request.args.get("lang"),
                sender_id=request.args.get("sender_id"),
            ),
            "notice-pdf",
        ),
    ]
    html = notice_document(preview, for_pdf=False, nav=nav)
    db_session().rollback()  # a preview keeps nothing
    return html


@blueprint.get("/reports/notice.pdf")
@requires_role("reviewer")
def notice_pdf() -> Response:
    preview = _preview()
    html = notice_document(preview, for_pdf=True)
    db_session().rollback()
    name = "".join(char if char.isalnum() or char in ".-" else "_" for char in preview.host)[:80]
    return pdf_response(html, f"takedown-notice-{name}.pdf")


@blueprint.get("/matches/<int:match_id>/bundle.zip")
def bundle(match_id: int) -> Response:
    """The external evidence bundle of one match (services/evidence/bundle.py): the page as fetched in a WARC
    file, evidence.json without notes or user names, SHA256SUMS signed with the installation's key and, with
    FPTRACK_TSA_URL set, timestamped. A time-stamping authority that fails answers 502."""
    session = db_session()
    if session.get(Match, match_id) is None:
        abort(404, description=gettext("There is no match with id %(id)s.", id=match_id))
    try:
        data = build_bundle(session, match_id, admin_state().settings)
    except BundleError as error:
        abort(502, description=f"The evidence bundle cannot be made: {error}.")
    return Response(
        data,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="fptrack-match-{match_id}-evidence.zip"'},
    )
