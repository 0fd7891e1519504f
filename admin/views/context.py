"""Per-app and per-request plumbing shared by the blueprints: the database session.

One engine per app (``app.extensions["fptrack"]``), one session per request, opened on first use and closed
when the app context tears down. (CSRF is Flask-WTF's ``CSRFProtect``, installed by ``admin.web``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import current_app, g
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from fptrack.core.settings import Settings

__all__ = ["AdminState", "admin_state", "close_db_session", "db_session"]


@dataclass
class AdminState:
    """What the app keeps for its lifetime. ``schema_ready`` flips to True on the first successful schema
    check, so a database initialised while the app runs is picked up without a restart."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    schema_ready: bool = field(default=False)


def admin_state() -> AdminState:
    state: AdminState = current_app.extensions["fptrack"]
    return state


def db_session() -> Session:
    if "db_session" not in g:
        g.db_session = admin_state().sessions()
    session: Session = g.db_session
    return session


def close_db_session(_error: BaseException | None = None) -> None:
    session: Session | None = g.pop("db_session", None)
    if session is not None:
        session.close()
