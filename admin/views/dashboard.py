"""``/``: what the tracker knows, in counts."""

from __future__ import annotations

from flask import Blueprint, render_template

from admin.views.context import db_session
from admin.views.queries import collect_stats

__all__ = ["blueprint"]

blueprint = Blueprint("dashboard", __name__)


@blueprint.get("/")
def index() -> str:
    return render_template("dashboard.html", stats=collect_stats(db_session()))
