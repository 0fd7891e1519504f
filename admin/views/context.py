"""Per-app and per-request plumbing shared by the blueprints: the database session and the CSRF token.

- One engine per app (``app.extensions["fptrack"]``), one session per request, opened on first use and closed
  when the app context tears down.
- CSRF: a random token kept in the signed session cookie, put in every form, and compared in constant time
  on every state-changing request. The cookie is ``SameSite=Lax`` and ``HttpOnly`` as a second line.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field

from flask import abort, current_app, g, request, session
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from storage.settings import Settings

__all__ = [
    "CSRF_FIELD",
    "AdminState",
    "admin_state",
    "close_db_session",
    "csrf_token",
    "db_session",
    "verify_csrf",
]

CSRF_FIELD = "csrf_token"
_CSRF_SESSION_KEY = "csrf_token"
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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


def csrf_token() -> str:
    token = session.get(_CSRF_SESSION_KEY)
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        session[_CSRF_SESSION_KEY] = token
    return token


def verify_csrf() -> None:
    """Abort with 400 unless a state-changing request carries this session's token (form field or the
    ``X-CSRF-Token`` header)."""
    if request.method not in _UNSAFE_METHODS:
        return
    expected = session.get(_CSRF_SESSION_KEY)
    sent = request.form.get(CSRF_FIELD) or request.headers.get("X-CSRF-Token") or ""
    if not isinstance(expected, str) or not expected or not hmac.compare_digest(expected, sent):
        abort(
            400,
            description="The form's security token is missing or has expired. Reload the page and try again.",
        )
