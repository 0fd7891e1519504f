"""Where the admin's pages read: a PostgreSQL streaming replica (``FPTRACK_READ_DATABASE_URL``), or the
primary.

Past one machine the admin's lists, dashboards and charts are the load a read replica takes off the primary
(docs/capacity.md). The rule, in one place:

- A view that only reads asks for :func:`read_session` (or, for a body streamed after the view returns,
  :func:`read_sessionmaker`). Everything else keeps :func:`admin.views.context.db_session`, the primary:
  every write, every view that reads then writes, logins, accounts, sessions and API tokens
  (``admin.security``), notices and evidence bundles. A view that might write must never ask for a read
  session: the standby refuses writes ("cannot execute ... in a read-only transaction").
- Even then the replica is used only for ``GET``/``HEAD`` requests with no recent write by the same login:
  every state-changing request of a logged-in person (but logging in or out) stamps their session cookie, and
  for :data:`READ_YOUR_WRITES_SECONDS` after it their reads go to the primary. A time window, not WAL
  positions: it costs no query and holds across admin processes (the stamp travels in the signed cookie); a
  replica lagging longer than the window shows that reviewer what it shows everyone (watch
  ``pg_stat_replication``). Requests authenticated by an API token carry no cookie: their GETs read the
  replica, and their POSTs answer with the new state.
- A replica that cannot be reached (refused, timed out after :data:`CONNECT_TIMEOUT_SECONDS`, cut) is left
  alone for :data:`REPLICA_RETRY_SECONDS` with one warning in the log, and reads go to the primary meanwhile:
  a stopped standby costs the primary load, never a failed page. (A connection lost in the middle of a page
  fails that one page, as the primary's would; the next ones read from the primary.)

Unset, nothing here is installed and every read goes to the primary.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from flask import Flask, current_app, g, request
from flask import session as cookie_session
from flask.wrappers import Response
from sqlalchemy import Engine, event
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from fptrack.admin.security import SAFE_METHODS
from fptrack.admin.views.context import admin_state, db_session
from fptrack.core.settings import Settings
from fptrack.storage.db import create_engine_for, session_factory

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "READ_YOUR_WRITES_SECONDS",
    "REPLICA_RETRY_SECONDS",
    "ReadReplica",
    "install_read_routing",
    "open_read_replica",
    "read_replica",
    "read_session",
    "read_sessionmaker",
]

log = logging.getLogger(__name__)

READ_YOUR_WRITES_SECONDS = 30
"""After a state-changing request, that login's pages read from the primary this long (module docstring)."""
REPLICA_RETRY_SECONDS = 15.0
"""A replica found unreachable is not tried again for this long: reads go to the primary meanwhile."""
CONNECT_TIMEOUT_SECONDS = 3
"""libpq's ``connect_timeout`` for the replica unless its URL sets one: an unreachable replica must cost a
page seconds, not the operating system's minutes of TCP retries."""
APPLICATION_NAME = "fptrack-admin-read"
"""The replica's connections name themselves so (unless the URL says otherwise): ``pg_stat_activity`` on the
standby shows the admin's reads."""

_EXTENSION = "fptrack.read_replica"
_WROTE_AT = "fptrack_wrote_at"  # key of the session cookie: when this login last changed something (epoch s)
# Logging in and out write only the account's bookkeeping, which is read on the primary anyway
# (admin.security, the users page): they do not send the next pages to the primary.
_ACCOUNT_ENDPOINTS = frozenset({"auth.login", "auth.logout"})


@dataclass
class ReadReplica:
    """The replica's engine and sessions, and whether it answered lately (shared by the app's threads)."""

    engine: Engine
    sessions: sessionmaker[Session]
    shown: str  # the URL without its password, for the log
    _down_until: float = 0.0  # time.monotonic() before which the replica is not tried
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def open_session(self) -> Session | None:
        """A session on a connection to the replica that answered just now (the pool's pre-ping), or None
        when the replica is resting after a failure or does not answer (then it rests)."""
        if time.monotonic() < self._down_until:
            return None
        session = self.sessions()
        try:
            session.connection()
        except OperationalError as error:
            session.close()
            self.mark_unreachable(error)
            return None
        if self._down_until:
            with self._lock:
                self._down_until = 0.0
            log.info("the read replica %s answers again; the admin reads from it", self.shown)
        return session

    def mark_unreachable(self, error: BaseException) -> None:
        """Rest the replica for :data:`REPLICA_RETRY_SECONDS`; one warning per outage, not one per page."""
        with self._lock:
            first = self._down_until == 0.0
            self._down_until = time.monotonic() + REPLICA_RETRY_SECONDS
        if first:
            reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
            log.warning(
                "the read replica %s is unreachable (%s); the admin reads from the primary, and tries the "
                "replica again every %.0f s",
                self.shown,
                reason,
                REPLICA_RETRY_SECONDS,
            )


def open_read_replica(settings: Settings) -> ReadReplica | None:
    """The replica named by ``settings.read_database_url`` (None when unset), connected lazily.

    Its engine is the primary's kind (``storage.db.create_engine_for`` on a copy of the settings naming the
    replica), with a connect timeout and an application name added unless the URL sets them."""
    if not settings.read_database_url:
        return None
    url = make_url(settings.read_database_url)
    defaults = {"connect_timeout": str(CONNECT_TIMEOUT_SECONDS), "application_name": APPLICATION_NAME}
    url = url.update_query_dict({name: value for name, value in defaults.items() if name not in url.query})
    engine = create_engine_for(
        settings.with_overrides(
            database_url=url.render_as_string(hide_password=False), read_database_url=None
        )
    )
    replica = ReadReplica(engine, session_factory(engine), url.render_as_string(hide_password=True))

    def connection_lost(context: ExceptionContext) -> None:
        # a pre-ping that fails is followed by a reconnect, which open_session judges
        if context.is_disconnect and not context.is_pre_ping:
            replica.mark_unreachable(context.original_exception)

    event.listen(engine, "handle_error", connection_lost)
    return replica


def install_read_routing(app: Flask, settings: Settings) -> None:
    """Open the replica of ``settings`` (nothing to do without one) and install the per-request plumbing:
    stamp the cookie of a login that changed something, close the request's replica session."""
    replica = open_read_replica(settings)
    app.extensions[_EXTENSION] = replica
    if replica is None:
        return
    app.after_request(_remember_write)
    app.teardown_appcontext(_close_read_session)


def read_replica(app: Flask) -> ReadReplica | None:
    """The app's replica (None: every read goes to the primary)."""
    replica: ReadReplica | None = app.extensions.get(_EXTENSION)
    return replica


def read_session() -> Session:
    """The session a view that only reads uses: the replica's when this request may read there (module
    docstring), else the request's primary session. One per request, opened on first use."""
    if "replica_session" not in g:
        replica = _replica_for_request()
        g.replica_session = replica.open_session() if replica is not None else None
    session: Session | None = g.replica_session
    return session if session is not None else db_session()


def read_sessionmaker() -> sessionmaker[Session]:
    """Sessions for a body streamed after the view returns (exports), chosen now by the same rule."""
    replica = _replica_for_request()
    if replica is not None:
        probe = replica.open_session()
        if probe is not None:
            probe.close()
            return replica.sessions
    return admin_state().sessions


def _replica_for_request() -> ReadReplica | None:
    replica = read_replica(current_app)
    if replica is None or request.method not in SAFE_METHODS or _wrote_recently():
        return None
    return replica


def _wrote_recently() -> bool:
    stamp = cookie_session.get(_WROTE_AT)
    return isinstance(stamp, int) and 0 <= time.time() - stamp < READ_YOUR_WRITES_SECONDS


def _remember_write(response: Response) -> Response:
    """Stamp the cookie of a logged-in person's state-changing request (whatever its outcome: a refused
    form may have counted something). The user is taken as Flask-Login already loaded it, never loaded
    here (no query in an after-request hook); requests authenticated by an API token keep their cookie
    untouched."""
    if request.method in SAFE_METHODS or g.get("api_token_user") or request.endpoint in _ACCOUNT_ENDPOINTS:
        return response
    user = g.get("_login_user")
    if user is not None and user.is_authenticated:
        cookie_session[_WROTE_AT] = int(time.time())
    return response


def _close_read_session(_error: BaseException | None = None) -> None:
    session: Session | None = g.pop("replica_session", None)
    if session is not None:
        session.close()
