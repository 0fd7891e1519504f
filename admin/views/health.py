"""``/healthz``: 200 when the database answers, 503 otherwise; for load balancers, so public and terse."""

from __future__ import annotations

import logging

from flask import Blueprint
from flask.typing import ResponseReturnValue
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from fptrack.admin.security import public
from fptrack.admin.views.context import admin_state

__all__ = ["blueprint"]

log = logging.getLogger(__name__)

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
@public
def healthz() -> ResponseReturnValue:
    try:
        with admin_state().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        log.warning("health check: the database does not answer: %s", error)
        return {"status": "unavailable", "database": "unavailable"}, 503
    return {"status": "ok", "database": "ok"}, 200
