"""The JSON API: ``/api/matches`` (paginated, filterable), ``/api/matches/<id>`` and ``/api/stats``.

Match objects are ``compare.records.match_to_dict`` (the same fields as ``fptrack matches --format json``)
plus ``id`` and ``status``. Errors are JSON too: ``{"error": "..."}`` with the HTTP status.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, request
from sqlalchemy.orm import joinedload

from admin.views.context import db_session
from admin.views.queries import collect_stats, list_matches, match_filter_from_args, positive_int_arg
from compare.records import match_to_dict
from storage.models import Chapter, Match, Page, Work

__all__ = ["API_MAX_PER_PAGE", "API_PER_PAGE", "blueprint", "match_json"]

API_PER_PAGE = 50
API_MAX_PER_PAGE = 500

blueprint = Blueprint("api", __name__, url_prefix="/api")


def match_json(match: Match) -> dict[str, Any]:
    return {"id": match.id, **match_to_dict(match), "status": match.status}


@blueprint.get("/matches")
def list_matches_json() -> dict[str, Any]:
    try:
        match_filter = match_filter_from_args(request.args)
        number = positive_int_arg(request.args, "page", 1)
        per_page = positive_int_arg(request.args, "per_page", API_PER_PAGE, maximum=API_MAX_PER_PAGE)
    except ValueError as error:
        abort(400, description=str(error))
    listing = list_matches(db_session(), match_filter, number, per_page)
    return {
        "items": [match_json(match) for match in listing.items],
        "page": listing.number,
        "per_page": listing.per_page,
        "total": listing.total,
        "pages": listing.pages,
    }


@blueprint.get("/matches/<int:match_id>")
def match_detail_json(match_id: int) -> dict[str, Any]:
    match = db_session().get(
        Match,
        match_id,
        options=[
            joinedload(Match.page).defer(Page.text),
            joinedload(Match.work).defer(Work.text),
            joinedload(Match.chapter).defer(Chapter.text),
        ],
    )
    if match is None:
        abort(404, description=f"There is no match with id {match_id}.")
    return match_json(match)


@blueprint.get("/stats")
def stats_json() -> dict[str, object]:
    return collect_stats(db_session()).as_json()
