"""``/matches``: the review queue, and ``/matches/<id>``: the evidence of one match, with the decision buttons."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy.orm import joinedload
from werkzeug.wrappers import Response

from admin.review import record_decision
from admin.security import requires_role
from admin.views.context import db_session
from admin.views.evidence import chapter_ranges, evidence_spans, highlight_segments, page_ranges
from admin.views.queries import (
    MATCH_STATUSES,
    REVIEW_STATUSES,
    list_matches,
    match_filter_from_args,
    positive_int_arg,
    work_choices,
)
from storage.models import Match

__all__ = ["PER_PAGE", "blueprint"]

PER_PAGE = 50

blueprint = Blueprint("matches", __name__, url_prefix="/matches")


@blueprint.get("")
def index() -> str:
    try:
        match_filter = match_filter_from_args(request.args)
        number = positive_int_arg(request.args, "page", 1)
    except ValueError as error:
        abort(400, description=str(error))
    session = db_session()
    listing = list_matches(session, match_filter, number, PER_PAGE)
    filters = {
        "status": match_filter.status or "",
        "work": "" if match_filter.work_id is None else str(match_filter.work_id),
    }
    return render_template(
        "matches.html",
        listing=listing,
        filters=filters,
        link_filters={name: value for name, value in filters.items() if value},
        statuses=MATCH_STATUSES,
        works=work_choices(session),
    )


def _load_match(match_id: int) -> Match:
    match = db_session().get(
        Match,
        match_id,
        options=[joinedload(Match.page), joinedload(Match.work), joinedload(Match.chapter)],
    )
    if match is None:
        abort(404, description=f"There is no match with id {match_id}.")
    return match


@blueprint.get("/<int:match_id>")
def detail(match_id: int) -> str:
    match = _load_match(match_id)
    chapter = match.chapter
    spans = evidence_spans(match.spans)
    # Spans are offsets into Work.text; the chapter shown is that text's [start, end) slice.
    chapter_text = match.work.text[chapter.start : chapter.end] if match.work.text else chapter.text
    return render_template(
        "match.html",
        match=match,
        spans=spans,
        page_segments=highlight_segments(match.page.text or "", page_ranges(spans)),
        chapter_segments=highlight_segments(chapter_text, chapter_ranges(spans, chapter.start)),
        review_statuses=REVIEW_STATUSES,
    )


@blueprint.post("/<int:match_id>/status")
@requires_role("reviewer")
def set_status(match_id: int) -> Response:
    # Host, Origin, login, role and the CSRF token were checked before this view ran (see admin.security).
    session = db_session()
    try:
        decision = record_decision(
            session,
            match_id,
            request.form.get("status", ""),
            reviewer=current_user.username,
            note=request.form.get("note", ""),
        )
    except LookupError:
        abort(404, description=f"There is no match with id {match_id}.")
    except ValueError as error:
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")
    session.commit()
    flash(f"Match {match_id} is now {decision.status}.")
    return redirect(url_for("matches.detail", match_id=match_id), code=303)
