"""``/takedowns``: each copy followed for takedown (the flagged and confirmed matches) and where it
stands: flagged, confirmed, notice sent, taken down or back up (``analytics.takedowns.COPY_STATES``), with
the time from the first notice to the first check that found it down; filters ``?state=``, ``?work=<id>``,
``?site=<host>``."""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request

from fptrack.admin.views.read_sessions import read_session
from fptrack.services.queries import (
    COPY_STATES,
    TakedownFilter,
    list_takedown_copies,
    positive_int_arg,
    takedown_filter_from_args,
    work_choices,
)

__all__ = ["PER_PAGE", "blueprint"]

PER_PAGE = 50

blueprint = Blueprint("takedowns", __name__, url_prefix="/takedowns")


def _filter_or_400() -> TakedownFilter:
    try:
        return takedown_filter_from_args(request.args)
    except ValueError as error:
        abort(400, description=str(error)[:1].upper() + str(error)[1:] + ".")


@blueprint.get("")
def index() -> str:
    takedown_filter = _filter_or_400()
    try:
        number = positive_int_arg(request.args, "page", 1)
    except ValueError as error:
        abort(400, description=str(error))
    session = read_session()
    listing, counts = list_takedown_copies(session, takedown_filter, number, PER_PAGE)
    link_filters = takedown_filter.as_args()
    return render_template(
        "takedowns.html",
        listing=listing,
        counts=counts,
        states=COPY_STATES,
        filters={**{name: "" for name in ("state", "work", "site")}, **link_filters},
        link_filters=link_filters,
        works=work_choices(session),
    )
