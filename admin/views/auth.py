"""``/login`` and ``/logout``: password login into a Flask-Login session (rate-limited, see
``services.accounts.users``).

A successful login also leaves a *device cookie* (``fptrack_device``, for ``/login`` only, an HMAC of the
username and the time under the app's secret key, valid :data:`DEVICE_LIFETIME`): a later login for that
username from this browser is a known device's, which failures from other addresses do not refuse (OWASP's
"device cookies"), so a stranger guessing from elsewhere cannot lock the owner out."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import timedelta

from flask import Blueprint, current_app, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_babel import lazy_gettext
from flask_login import current_user, login_user, logout_user
from flask_wtf import FlaskForm
from sqlalchemy import select
from wtforms import HiddenField, PasswordField, StringField
from wtforms.validators import DataRequired, Length

from fptrack.admin.security import client_address, is_safe_next, public, requires_role, session_user
from fptrack.admin.views.context import db_session
from fptrack.services.accounts.users import (
    MAX_PASSWORD_LENGTH,
    LoginRefused,
    authenticate,
    end_sessions,
    normalise_username,
)
from fptrack.storage.models import User

__all__ = ["DEVICE_COOKIE", "DEVICE_LIFETIME", "LoginForm", "blueprint"]

blueprint = Blueprint("auth", __name__)

DEVICE_COOKIE = "fptrack_device"
DEVICE_LIFETIME = timedelta(days=180)
CLOCK_SKEW_SECONDS = 300  # the admin's machines may disagree on the time by this much


class LoginForm(FlaskForm):  # type: ignore[misc]  # Flask-WTF ships no type hints
    username = StringField(lazy_gettext("Username"), validators=[DataRequired(), Length(max=150)])
    password = PasswordField(
        lazy_gettext("Password"), validators=[DataRequired(), Length(max=MAX_PASSWORD_LENGTH)]
    )
    next = HiddenField()


def _destination(target: str | None) -> str:
    return target if target and is_safe_next(target) else url_for("dashboard.index")


@blueprint.route("/login", methods=["GET", "POST"])
@public
def login() -> ResponseReturnValue:
    form = LoginForm()
    if request.method == "GET":
        if current_user.is_authenticated:
            return redirect(_destination(request.args.get("next")), code=303)
        form.next.data = request.args.get("next", "")
        return _page(form)
    if not form.validate():
        return _page(form, "Enter a username and a password.", 400)
    database = db_session()
    try:
        user = authenticate(
            database,
            form.username.data or "",
            form.password.data or "",
            client_address(),
            known_device=_known_device(form.username.data or ""),
        )
    except LoginRefused as refused:
        database.rollback()
        response = _page(form, str(refused).capitalize() + ".", 429)
        return response[0], response[1], {"Retry-After": str(refused.retry_after)}
    database.commit()
    if user is None:
        return _page(form, "Wrong username or password.", 401)
    session.clear()  # nothing of the anonymous session (its CSRF token included) survives the login
    login_user(session_user(user))
    session.permanent = True
    landing = redirect(_destination(form.next.data), code=303)
    landing.set_cookie(
        DEVICE_COOKIE,
        _device_mark(user.username, int(time.time())),
        max_age=int(DEVICE_LIFETIME.total_seconds()),
        path=url_for("auth.login"),
        secure=bool(current_app.config["SESSION_COOKIE_SECURE"]),
        httponly=True,
        samesite="Lax",
    )
    return landing


def _device_mark(username: str, issued: int) -> str:
    """The cookie's value for ``username``, issued at ``issued`` (Unix seconds): the time and an HMAC of
    both under the app's secret key. The username itself is not in the cookie."""
    key = current_app.config["SECRET_KEY"]
    digest = hmac.new(key, f"known-device:{username}:{issued}".encode(), hashlib.sha256).hexdigest()
    return f"{issued}.{digest}"


def _known_device(username: str) -> bool:
    """Whether this browser carries a device cookie we made for ``username`` and that has not expired."""
    issued_text, _, _digest = request.cookies.get(DEVICE_COOKIE, "").partition(".")
    if not (issued_text.isascii() and issued_text.isdigit()) or len(issued_text) > 12:
        return False
    issued = int(issued_text)
    if not -CLOCK_SKEW_SECONDS <= time.time() - issued <= DEVICE_LIFETIME.total_seconds():
        return False
    try:
        expected = _device_mark(normalise_username(username), issued)
    except ValueError:
        return False
    return hmac.compare_digest(request.cookies.get(DEVICE_COOKIE, ""), expected)


def _page(form: LoginForm, error: str = "", status: int = 200) -> tuple[str, int]:
    form.password.data = ""
    no_accounts = db_session().scalar(select(User.id).limit(1)) is None
    return render_template("login.html", form=form, error=error, no_accounts=no_accounts), status


@blueprint.post("/logout")
@requires_role("viewer")
def logout() -> ResponseReturnValue:
    """Ends every session of the user, not only this browser's: a cookie copied before the logout is worth
    nothing after it (the session version is part of each session's token, :mod:`admin.security`)."""
    end_sessions(db_session(), current_user.user_id)
    db_session().commit()
    logout_user()
    session.clear()
    return redirect(url_for("auth.login"), code=303)
