"""The admin web app: ``create_app(settings)`` builds a Flask app over the fptrack database.

Pages (server-rendered, no JavaScript): the dashboard ``/``, ``/works``, ``/works/<id>``, ``/matches`` and
the evidence view ``/matches/<id>`` with the reviewer's confirm/dismiss buttons; the JSON API under ``/api``.

Everything shown comes from crawled pages, i.e. from strangers: it is treated as hostile. Jinja autoescapes
every value (nothing crawled is ever marked safe), highlighted passages are built by splitting text rather
than inserting markup, only ``http(s)`` URLs become links, and a strict Content-Security-Policy forbids any
script at all, so even a slip in escaping would not run code. State changes are POSTs with a per-session
CSRF token.

The session cookie is signed with a key kept in ``<data dir>/admin-secret.key`` (created on first start,
mode 0600), so every worker of one deployment and every restart agree on it.
"""

from __future__ import annotations

import logging
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

from flask import Flask, Response, render_template, request
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from admin.views import BLUEPRINTS
from admin.views.context import (
    CSRF_FIELD,
    AdminState,
    admin_state,
    close_db_session,
    csrf_token,
    verify_csrf,
)
from admin.views.evidence import is_web_url
from storage.db import DatabaseUnavailable, SchemaOutOfDate, check_schema, create_engine_for, session_factory
from storage.settings import Settings

__all__ = ["CONTENT_SECURITY_POLICY", "SECRET_KEY_FILE", "create_app"]

log = logging.getLogger(__name__)

SECRET_KEY_FILE = "admin-secret.key"

# No script of any kind, styles from our own origin only, forms may only post back to us.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)

_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Following a link to a pirate site must not tell it where the reviewer came from.
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def create_app(settings: Settings | None = None) -> Flask:
    """Build the admin app: one engine for the app's lifetime, one session per request."""
    settings = settings or Settings.from_env()
    app = Flask(__name__, template_folder="templates", static_folder="static")
    app.config.update(
        SECRET_KEY=_secret_key(settings.data_dir),
        SESSION_COOKIE_NAME="fptrack_admin",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.ensure_ascii = False  # type: ignore[attr-defined]
    app.jinja_env.autoescape = True

    engine = create_engine_for(settings)
    app.extensions["fptrack"] = AdminState(settings=settings, engine=engine, sessions=session_factory(engine))

    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)

    app.before_request(_require_schema)
    app.before_request(verify_csrf)
    app.after_request(_security_headers)
    app.teardown_appcontext(close_db_session)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(SchemaOutOfDate, _database_not_ready)
    app.register_error_handler(DatabaseUnavailable, _database_not_ready)
    app.register_error_handler(OperationalError, _database_lost)

    app.jinja_env.tests["web_url"] = is_web_url
    app.jinja_env.filters["when"] = _format_time
    app.jinja_env.globals["csrf_field"] = CSRF_FIELD

    @app.context_processor
    def _template_globals() -> dict[str, object]:
        return {"csrf_token": csrf_token}

    return app


def _secret_key(data_dir: Path) -> bytes:
    """Read the key from the data folder, creating it (0600) on first start; if the folder is read-only, fall
    back to a per-process key (forms then expire when the process restarts)."""
    path = data_dir / SECRET_KEY_FILE
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except ValueError:
        log.warning("%s is not a hex key; replacing it", path)
    key = secrets.token_bytes(32)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(key.hex())
    except OSError as error:
        log.warning("cannot keep the admin secret key in %s (%s); using a per-process key", path, error)
    return key


def _require_schema() -> None:
    if request.endpoint == "static":
        return
    state = admin_state()
    if not state.schema_ready:
        check_schema(state.engine, state.settings)  # raises; rendered by _database_not_ready
        state.schema_ready = True


def _security_headers(response: Response) -> Response:
    for name, value in _SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if request.endpoint != "static":
        response.headers.setdefault("Cache-Control", "no-store")
    return response


def _wants_json() -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def _http_error(error: HTTPException) -> ResponseReturnValue:
    code = error.code or 500
    if _wants_json():
        return {"error": error.description or error.name}, code
    return render_template("error.html", code=code, name=error.name, description=error.description), code


def _database_not_ready(error: Exception) -> ResponseReturnValue:
    message = str(error)
    if _wants_json():
        return {"error": message}, 503
    initialise = isinstance(error, SchemaOutOfDate)
    return render_template("not_ready.html", message=message, initialise=initialise), 503


def _database_lost(error: OperationalError) -> ResponseReturnValue:
    log.warning("database error during %s %s: %s", request.method, request.path, error)
    admin_state().schema_ready = False
    return _database_not_ready(DatabaseUnavailable("the database stopped answering; is it running?"))


def _format_time(value: datetime | None) -> str:
    """UTC, to the minute. SQLite hands back naive datetimes; they were written in UTC."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M UTC")
