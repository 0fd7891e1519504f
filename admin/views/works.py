"""``/works`` and ``/works/<id>``: the registered works and their chapters, with match counts."""

from __future__ import annotations

from flask import Blueprint, abort, render_template

from fptrack.admin.views.read_sessions import read_session
from fptrack.services.queries import chapter_rows, work_rows

__all__ = ["blueprint"]

blueprint = Blueprint("works", __name__, url_prefix="/works")


@blueprint.get("")
def index() -> str:
    return render_template("works.html", works=work_rows(read_session()))


@blueprint.get("/<int:work_id>")
def detail(work_id: int) -> str:
    session = read_session()
    rows = work_rows(session, work_id)
    if not rows:
        abort(404, description=f"There is no work with id {work_id}.")
    return render_template("work.html", work=rows[0], chapters=chapter_rows(session, work_id))
