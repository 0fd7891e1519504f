"""Who may ask the admin what: host and origin checks, login sessions, roles.

Every request goes through these checks, in this order (``install_security``):

1. **Host.** The ``Host`` header must name one of ``FPTRACK_ADMIN_HOSTS`` (a DNS-rebinding page cannot talk
   to the admin through a name of its own). ``/healthz`` is exempt: it says only whether the database answers.
2. **Origin.** A state-changing request (POST, PUT, PATCH, DELETE) must come from a page of the admin itself:
   its ``Origin`` (or, without one, its ``Referer``) must be an admin host, with the same host and port as the
   request. A request carrying neither is accepted over plain http (non-browser clients; the CSRF token is
   still required) and refused over https. The admin sends ``Referrer-Policy: same-origin``: with
   ``no-referrer`` browsers would send ``Origin: null`` on their own forms.
3. **Database ready** (``admin.web``), then **login.** Every endpoint needs a logged-in account except those
   marked :func:`public` (the login page, ``/static``, ``/healthz``). Without one, a page redirects to
   ``/login`` and the API answers 401 JSON.
4. **Role.** Each view declares the role it needs with :func:`requires_role`; without a declaration, reading
   (GET, HEAD, OPTIONS) needs ``viewer`` and anything else needs ``reviewer``. Too low a role is a 403.
5. **CSRF** (Flask-WTF's ``CSRFProtect``) on every state-changing request.

An ``/api`` request carrying ``Authorization: Bearer <token>`` is authenticated by that API token alone
(``services.accounts.tokens``; a bad token is a 401 even with a valid session cookie): it acts as the
token's user with that user's role, and skips the Origin and CSRF checks, which protect ambient credentials
(cookies) that a browser would attach to a forged cross-site request; a browser never attaches an
``Authorization`` header by itself.

Sessions are Flask's signed cookie (``HttpOnly``, ``SameSite=Lax``, ``Secure`` per
``FPTRACK_ADMIN_SECURE_COOKIES``), valid for :data:`SESSION_LIFETIME`. The session names the user by id and a
token derived from the secret key and the user's password hash, so changing a password (or removing or
deactivating the account) ends every session of that user at their next request.

With ``FPTRACK_ADMIN_TRUSTED_USER_HEADER`` set, a request whose peer address is one of
``FPTRACK_ADMIN_TRUSTED_PROXIES`` may name its user in that header instead (the proxy authenticated it); the
name must be an active account, and its role applies. From any other address the header is ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, abort, current_app, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import AnonymousUserMixin, LoginManager, UserMixin, current_user
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.orm import Session

from fptrack.core.settings import Settings
from fptrack.services.accounts.users import find_active_user, has_role
from fptrack.storage.models import User

__all__ = [
    "SESSION_LIFETIME",
    "SessionUser",
    "bearer_token",
    "check_csrf_unless_token",
    "client_address",
    "install_security",
    "is_safe_next",
    "public",
    "requires_role",
    "session_user",
]

F = TypeVar("F", bound=Callable[..., Any])

SESSION_LIFETIME = timedelta(hours=12)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Endpoints that are not views of ours but must stay reachable without a session.
_PUBLIC_ENDPOINTS = frozenset({"static"})
_HOST_EXEMPT_ENDPOINTS = frozenset({"health.healthz"})


class SessionUser(UserMixin):  # type: ignore[misc]  # flask-login ships no type hints
    """The logged-in account as the request sees it: a detached snapshot, never the ORM row."""

    def __init__(self, user_id: int, username: str, role: str, token: str) -> None:
        self.user_id = user_id
        self.username = username
        self.role = role
        self.token = token

    def get_id(self) -> str:
        return f"{self.user_id}:{self.token}"

    def can(self, role: str) -> bool:
        return has_role(self.role, role)


class Anonymous(AnonymousUserMixin):  # type: ignore[misc]  # flask-login ships no type hints
    username = ""
    role = ""

    def can(self, role: str) -> bool:
        return False


def _session_token(secret_key: bytes | str, user: User) -> str:
    """Changes whenever the password or the user's session version does: a new password or a logout ends
    every session of the user, however many browsers hold one and whoever copied its cookie."""
    key = secret_key if isinstance(secret_key, bytes) else secret_key.encode()
    seal = f"{user.id}:{user.password_hash}:{user.session_version or 0}"
    return hmac.new(key, seal.encode(), hashlib.sha256).hexdigest()[:32]


def session_user(user: User) -> SessionUser:
    return SessionUser(user.id, user.username, user.role, _session_token(current_app.secret_key or b"", user))


def public(view: F) -> F:
    """Mark a view as reachable without logging in."""
    view.public = True  # type: ignore[attr-defined]
    return view


def requires_role(role: str) -> Callable[[F], F]:
    """Declare the least role a view needs (``viewer`` < ``reviewer`` < ``admin``)."""
    has_role(role, role)  # ValueError for an unknown role, at import time

    def mark(view: F) -> F:
        view.required_role = role  # type: ignore[attr-defined]
        return view

    return mark


def _in_networks(address: str | None, networks: tuple[str, ...]) -> bool:
    if not address or not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in networks)


def _settings() -> Settings:
    settings: Settings = current_app.extensions["fptrack"].settings
    return settings


def _db() -> Session:
    from fptrack.admin.views.context import db_session  # admin.views imports this module

    return db_session()


def client_address() -> str:
    """The client's address: the peer, or behind trusted proxies the last ``X-Forwarded-For`` entry that is
    not itself a trusted proxy (entries further left were written by the client and prove nothing)."""
    proxies = _settings().admin_trusted_proxies
    peer = request.remote_addr or ""
    if not _in_networks(peer, proxies):
        return peer
    forwarded = [
        part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()
    ]
    for address in reversed(forwarded):
        if not _in_networks(address, proxies):
            return address[:64]
    return peer


def _hostname(netloc: str) -> str | None:
    try:
        return urlsplit("//" + netloc).hostname
    except ValueError:
        return None


def _check_host() -> None:
    if request.endpoint in _HOST_EXEMPT_ENDPOINTS:
        return
    if _hostname(request.host) not in _settings().admin_hosts:
        abort(400, description="This server does not answer to that host name (see FPTRACK_ADMIN_HOSTS).")


def bearer_token() -> str | None:
    """The token of an ``Authorization: Bearer ...`` header on an ``/api`` request, else None. Such a request
    is authenticated by its token alone (never by the session cookie), so it needs neither the Origin check
    nor a CSRF token: a browser never attaches this header to a cross-site request by itself."""
    if not _wants_json():
        return None
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        return None
    return token.strip() if scheme.lower() == "bearer" else ""


def _check_origin() -> None:
    if request.method in SAFE_METHODS or bearer_token() is not None:
        return
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    if not source:
        if request.is_secure:
            abort(403, description="A form sent over https must carry its Origin or Referer.")
        return
    try:
        parts = urlsplit(source)
        netloc, hostname = parts.netloc.lower(), parts.hostname
    except ValueError:
        netloc, hostname = "", None
    if hostname not in _settings().admin_hosts or netloc != request.host.lower():
        abort(403, description="This form was not sent from a page of this admin.")


def _wants_json() -> bool:
    return request.path == "/api" or request.path.startswith("/api/")


def _load_token_user() -> ResponseReturnValue | None:
    """An ``/api`` request with an ``Authorization`` header acts as the token's user, or is a 401."""
    token = bearer_token()
    if token is None:
        return None
    from fptrack.services.accounts.tokens import authenticate_token

    database = _db()
    user = authenticate_token(database, token) if token else None
    if user is None:
        database.rollback()
        return {"error": "invalid or revoked API token"}, 401, {"WWW-Authenticate": 'Bearer realm="fptrack"'}
    database.commit()  # last_used_at
    # Flask-Login takes current_user from g._login_user: the token user, without touching the session cookie
    g._login_user = SessionUser(user.id, user.username, user.role, token="")
    g.api_token_user = True
    return None


def check_csrf_unless_token(csrf: CSRFProtect) -> None:
    """Flask-WTF's CSRF check on every state-changing request, except those authenticated by an API token."""
    if request.method in SAFE_METHODS or g.get("api_token_user"):
        return
    csrf.protect()


def _require_login_and_role() -> ResponseReturnValue | None:
    endpoint = request.endpoint
    if endpoint in _PUBLIC_ENDPOINTS:
        return None
    view = current_app.view_functions.get(endpoint) if endpoint else None
    if view is not None and getattr(view, "public", False):
        return None
    if not current_user.is_authenticated:
        if _wants_json():
            return {"error": "login required"}, 401
        target = request.full_path if request.method in SAFE_METHODS else None
        if target is not None and target.endswith("?"):
            target = target[:-1]
        return redirect(url_for("auth.login", next=target), code=303)
    if view is None:
        return None  # a 404 or 405 follows
    needed = getattr(view, "required_role", None) or (
        "viewer" if request.method in SAFE_METHODS else "reviewer"
    )
    if not current_user.can(needed):
        abort(403, description=f"This needs the {needed} role; your account is a {current_user.role}.")
    return None


def is_safe_next(target: str | None) -> bool:
    """True for a path on this site (``/matches?page=2``), never for another site (``//evil``,
    ``https://``)."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return False
    if any(ord(char) < 0x20 or char == "\\" for char in target):
        return False
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def _load_user(user_id: str) -> SessionUser | None:
    raw_id, _, token = user_id.partition(":")
    try:
        number = int(raw_id)
    except ValueError:
        return None
    if not 1 <= number < 2**63:
        return None
    user = find_active_user(_db(), user_id=number)
    if user is None:
        return None
    candidate = session_user(user)
    return candidate if hmac.compare_digest(candidate.token, token) else None


def _load_user_from_proxy() -> SessionUser | None:
    settings = _settings()
    header = settings.admin_trusted_user_header
    if not header or not _in_networks(request.remote_addr, settings.admin_trusted_proxies):
        return None
    name = request.headers.get(header, "").strip()
    if not name:
        return None
    user = find_active_user(_db(), username=name)
    return session_user(user) if user is not None else None


def install_security(app: Flask, settings: Settings) -> None:
    """Session cookie flags, Flask-Login, and the host / origin / login / role checks, in that order."""
    app.config.update(
        SESSION_COOKIE_NAME="fptrack_admin",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.admin_cookies_secure,
        PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME,
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the session (SESSION_LIFETIME)
    )
    login_manager = LoginManager()
    login_manager.anonymous_user = Anonymous
    login_manager.session_protection = "basic"
    login_manager.user_loader(_load_user)
    login_manager.request_loader(lambda _request: _load_user_from_proxy())
    login_manager.init_app(app)
    app.before_request(_check_host)
    app.before_request(_check_origin)


def install_access_policy(app: Flask) -> None:
    """API tokens, then the login and role checks; installed after the database check of ``admin.web``."""
    app.before_request(_load_token_user)
    app.before_request(_require_login_and_role)
