"""The admin web app: ``create_app(settings)`` builds a Flask app over the fptrack database.

Pages (server-rendered, no JavaScript): the dashboard ``/``, ``/works``, ``/works/<id>``, ``/matches`` and
the evidence view ``/matches/<id>`` with the reviewer's confirm/dismiss buttons; the JSON API under ``/api``.

Every page needs a logged-in account with a role (``admin.security``: host, origin, login, role, CSRF);
``/login``, ``/static`` and ``/healthz`` are the only public routes.

Everything shown comes from crawled pages, i.e. from strangers: it is treated as hostile. Jinja autoescapes
every value (nothing crawled is ever marked safe), highlighted passages are built by splitting text rather
than inserting markup, only ``http(s)`` URLs become links, and a strict Content-Security-Policy forbids any
script at all, so even a slip in escaping would not run code. State changes are POSTs with Flask-WTF's CSRF
token.

The session cookie is signed with a key kept in ``<data dir>/admin-secret.key`` (created on first start,
mode 0600), so every worker of one deployment and every restart agree on it.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from flask import Flask, Response, abort, render_template, request
from flask.typing import ResponseReturnValue
from flask_babel import gettext
from flask_wtf.csrf import CSRFError, CSRFProtect
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException
from werkzeug.routing import IntegerConverter, Map

from fptrack.admin.i18n import install_i18n
from fptrack.admin.security import check_csrf_unless_token, install_access_policy, install_security
from fptrack.admin.views import BLUEPRINTS
from fptrack.admin.views import networks as networks_views
from fptrack.admin.views.context import AdminState, admin_state, close_db_session
from fptrack.admin.views.read_sessions import install_read_routing
from fptrack.core.settings import Settings
from fptrack.jobs.bootstrap import prepare_process
from fptrack.services.evidence.passages import is_web_url
from fptrack.services.queries import MAX_ID
from fptrack.storage.db import (
    DatabaseUnavailable,
    SchemaOutOfDate,
    check_schema,
    create_engine_for,
    session_factory,
)

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECRET_KEY_FILE",
    "create_app",
    "ensure_secret_key",
    "format_duration",
    "format_schedule",
    "refuse_nul_bytes",
]

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
    # Following a link to a pirate site must not tell it where the reviewer came from; our own forms keep
    # their Origin (with no-referrer, browsers send "Origin: null" on POSTs).
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def _at_most(limit: int) -> str:
    """A regular expression matching exactly the decimal numbers from 0 to ``limit`` (no leading zeros
    past the limit's length): shorter numbers, then each digit below the limit's with any digits after."""
    digits = str(limit)
    choices = [rf"\d{{1,{len(digits) - 1}}}"] if len(digits) > 1 else []
    for place, digit in enumerate(digits):
        if digit != "0":
            rest = len(digits) - place - 1
            choices.append(f"{digits[:place]}[0-{int(digit) - 1}]" + (rf"\d{{{rest}}}" if rest else ""))
    choices.append(digits)
    return "(?:" + "|".join(choices) + ")"


class DatabaseIdConverter(IntegerConverter):
    """``<int:...>`` in our routes: at most a signed 64-bit value, so a huge id is a 404 rather than an
    OverflowError in the database driver. The bound is in the pattern, not only in the conversion: a URL the
    pattern takes but the conversion refuses would be a 405 where another route has the same path."""

    regex = _at_most(MAX_ID)

    def __init__(
        self, map: Map, fixed_digits: int = 0, min: int | None = 1, max: int | None = MAX_ID
    ) -> None:
        super().__init__(map, fixed_digits=fixed_digits, min=min, max=max)


def create_app(settings: Settings | None = None) -> Flask:
    """Build the admin app: one engine for the app's lifetime (two with a read replica), one session per
    request (and one on the replica for a page that only reads)."""
    settings = settings or Settings.from_env()
    app = Flask(__name__, template_folder="templates", static_folder="static")
    app.url_map.converters["int"] = DatabaseIdConverter
    app.config.update(SECRET_KEY=ensure_secret_key(settings.data_dir), MAX_CONTENT_LENGTH=64 * 1024)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.ensure_ascii = False  # type: ignore[attr-defined]
    app.jinja_env.autoescape = True

    prepare_process(settings)
    engine = create_engine_for(settings)
    app.extensions["fptrack"] = AdminState(settings=settings, engine=engine, sessions=session_factory(engine))
    # read-only pages read from FPTRACK_READ_DATABASE_URL's replica when set (admin.views.read_sessions)
    install_read_routing(app, settings)

    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    app.register_blueprint(networks_views.blueprint)  # pirate networks and discovered candidates

    # Order matters: host and origin first, then the database, then login and role, then the CSRF token.
    install_security(app, settings)
    app.before_request(refuse_nul_bytes)
    app.before_request(_require_schema)
    install_access_policy(app)
    # CSRFProtect's own hook is off (WTF_CSRF_CHECK_DEFAULT); ours runs it on every state-changing request
    # except those authenticated by an API token (admin.security.check_csrf_unless_token).
    app.config["WTF_CSRF_CHECK_DEFAULT"] = False
    csrf = CSRFProtect(app)
    app.before_request(lambda: check_csrf_unless_token(csrf))
    app.after_request(_security_headers)
    app.teardown_appcontext(close_db_session)
    app.register_error_handler(CSRFError, _csrf_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(SchemaOutOfDate, _database_not_ready)
    app.register_error_handler(DatabaseUnavailable, _database_not_ready)
    app.register_error_handler(OperationalError, _database_lost)

    app.jinja_env.tests["web_url"] = is_web_url
    install_i18n(app)  # languages, times in FPTRACK_TIMEZONE, site names (filters when, site_name)
    app.jinja_env.filters["duration"] = format_duration
    app.jinja_env.filters["schedule"] = format_schedule
    return app


def ensure_secret_key(data_dir: Path) -> bytes:
    """Read the key from the data folder, creating it (0600) on first start; if the folder is read-only, fall
    back to a per-process key (sessions then end when the process restarts).

    Creation is atomic (written aside, then hard-linked into place, which fails if another process won the
    race), so gunicorn workers starting together agree on one key.
    """
    path = data_dir / SECRET_KEY_FILE
    for _attempt in range(3):
        try:
            return bytes.fromhex(path.read_text(encoding="ascii").strip())
        except FileNotFoundError:
            pass
        except ValueError:
            log.warning("%s is not a hex key; replacing it", path)
            path.unlink(missing_ok=True)
        key = secrets.token_bytes(32)
        aside = data_dir / f".{SECRET_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="ascii") as handle:
                handle.write(key.hex())
            try:
                os.link(aside, path)
            except FileExistsError:
                continue  # another process created it first: read theirs
            return key
        except OSError as error:
            log.warning("cannot keep the admin secret key in %s (%s); using a per-process key", path, error)
            return key
        finally:
            aside.unlink(missing_ok=True)
    raise RuntimeError(f"cannot read or create the admin secret key {path}")


def refuse_nul_bytes() -> None:
    """400 for a NUL character anywhere in the path, a query argument, a form field (names and values, file
    names, not file contents) or a JSON body's strings: no text we keep may hold one, and PostgreSQL refuses
    it in a query with an error that would otherwise be a 500 (the anonymous login form included)."""
    texts: list[str] = [request.path]
    for fields in (request.args, request.form):
        for name, values in fields.lists():
            texts.append(name)
            texts.extend(values)
    for name, upload in request.files.items(multi=True):
        texts.extend((name, upload.filename or ""))
    if any("\0" in text for text in texts) or (request.is_json and _json_holds_nul()):
        abort(400, description="The request holds a NUL character, which no field accepts.")


def _json_holds_nul() -> bool:
    try:
        return _holds_nul(request.get_json(silent=True))
    except RecursionError:  # nested deeper than we look: the API refuses such a body itself
        return False


def _holds_nul(value: object) -> bool:
    """Whether a parsed JSON value has a NUL character in any of its strings (keys included)."""
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    return False


def _require_schema() -> None:
    if request.endpoint in ("static", "health.healthz"):
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


def _csrf_error(error: CSRFError) -> ResponseReturnValue:
    error.description = gettext(
        "The form's security token is missing or has expired. Reload the page and try again."
    )
    return _http_error(error)


def _database_not_ready(error: Exception) -> ResponseReturnValue:
    """503. An uninitialised schema says to run ``fptrack init``; an unreachable database says only that
    it is unavailable: its user, host, port and name go to the log, never to the page."""
    initialise = isinstance(error, SchemaOutOfDate)
    if initialise:
        message = str(error)
    else:
        log.warning("database unavailable during %s %s: %s", request.method, request.path, error)
        message = "database unavailable"
    if _wants_json():
        return {"error": message}, 503
    return render_template("not_ready.html", message=message, initialise=initialise), 503


def _database_lost(error: OperationalError) -> ResponseReturnValue:
    admin_state().schema_ready = False
    return _database_not_ready(DatabaseUnavailable(f"the database stopped answering: {error}"))


def format_duration(seconds: int | None) -> str:
    """A duration for people, to two units: ``42 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``."""
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    units = ((gettext("d"), 86400), (gettext("h"), 3600), (gettext("min"), 60), (gettext("s"), 1))
    parts: list[str] = []
    for name, size in units:
        if seconds >= size or (size == 1 and not parts):
            parts.append(f"{seconds // size} {name}")
            seconds %= size
        elif parts:
            break
        if len(parts) == 2:
            break
    return " ".join(parts)


def format_schedule(schedule: str) -> str:
    """A site's schedule for people: ``every 6 h``, ``cron 0 3 * * * (UTC)``, ``manual``."""
    if not schedule:
        return str(gettext("manual"))
    if schedule.isdigit():
        return str(gettext("every %(duration)s", duration=format_duration(int(schedule))))
    return str(gettext("cron %(schedule)s (UTC)", schedule=schedule))
