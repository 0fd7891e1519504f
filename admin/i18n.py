"""The admin's languages, times and site names.

Languages: English and Chinese (Flask-Babel over the catalog in ``admin/translations``, whose compiled
``.mo`` is committed beside its ``.po`` so that a fresh clone runs without a build step). A request is in the
language its user chose with the header's switch (the ``fptrack_language`` cookie), else the one its
browser asks for first among ours (``Accept-Language: zh-CN`` is Chinese), else English.

Times: every time a page shows is in the installation's zone (``FPTRACK_TIMEZONE``, Asia/Shanghai unless set),
to the minute (``when``) or the second (``when_seconds``), without the zone's name or microseconds.

Sites: a page that shows a host (``127.0.0.1:18481``) shows the monitored site's name instead when it has one
(``site_name``), with the host in the title attribute; one query per request maps every named site.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from flask import Flask, g, redirect, request
from flask.typing import ResponseReturnValue
from flask_babel import Babel
from markupsafe import Markup
from sqlalchemy import select

from fptrack.admin.security import public
from fptrack.admin.views.context import admin_state, db_session
from fptrack.admin.vocabulary import kind_label, label
from fptrack.storage.models import Site

__all__ = [
    "LANGUAGES",
    "LANGUAGE_COOKIE",
    "TRANSLATIONS",
    "install_i18n",
    "local_time",
    "select_language",
    "site_name",
]

LANGUAGES = ("en", "zh")
LANGUAGE_COOKIE = "fptrack_language"
TRANSLATIONS = Path(__file__).resolve().parent / "translations"
_LANGUAGE_NAMES = {"en": "English", "zh": "中文"}
_ONE_YEAR = 365 * 24 * 3600


def select_language() -> str:
    """The chosen language (cookie), else the browser's first of ours, else English."""
    chosen = request.cookies.get(LANGUAGE_COOKIE, "")
    if chosen in LANGUAGES:
        return chosen
    return request.accept_languages.best_match(LANGUAGES) or "en"


def _select_timezone() -> str:
    return admin_state().settings.timezone


def local_time(value: datetime | None, *, seconds: bool = False) -> str:
    """``value`` in the installation's zone: ``2026-11-29 14:22`` (``14:22:22`` with ``seconds``). Naive
    datetimes (SQLite's) were written in UTC."""
    if value is None:
        return ""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    local = value.astimezone(ZoneInfo(admin_state().settings.timezone))
    return local.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _when_seconds(value: datetime | None) -> str:
    return local_time(value, seconds=True)


def _site_names() -> dict[str, str]:
    if "site_names" not in g:
        rows = db_session().execute(select(Site.host, Site.name).where(Site.name != ""))
        g.site_names = {host: name for host, name in rows}
    names: dict[str, str] = g.site_names
    return names


def site_name(host: str | None) -> Markup:
    """A monitored site's name with its host as the title, or the host itself when no site names it."""
    if not host:
        return Markup("")
    name = _site_names().get(host)
    if not name or name == host:
        return Markup("{}").format(host)
    return Markup('<span class="site-name" title="{}">{}</span>').format(host, name)


def _language_switch() -> ResponseReturnValue:
    """``POST /language``: keep the chosen language in a cookie and go back to the page it was chosen on."""
    language = request.form.get("language", "")
    back = request.form.get("next", "") or "/"
    parts = urlsplit(back)
    if parts.scheme or parts.netloc or not back.startswith("/") or back.startswith("//"):
        back = "/"  # only a path of ours: never a redirect to another site
    response = redirect(back, code=303)
    if language in LANGUAGES:
        response.set_cookie(LANGUAGE_COOKIE, language, max_age=_ONE_YEAR, httponly=True, samesite="Lax")
    else:
        response.delete_cookie(LANGUAGE_COOKIE)  # "the browser's language"
    return response


def install_i18n(app: Flask) -> None:
    """Flask-Babel with our selectors, the time and site filters, and the language switch's route."""
    app.config["BABEL_TRANSLATION_DIRECTORIES"] = str(TRANSLATIONS)
    app.config["BABEL_DEFAULT_LOCALE"] = "en"
    Babel(app, locale_selector=select_language, timezone_selector=_select_timezone)
    app.jinja_env.filters["when"] = local_time
    app.jinja_env.filters["when_seconds"] = _when_seconds
    app.jinja_env.filters["site_name"] = site_name
    app.jinja_env.filters["label"] = label
    app.jinja_env.filters["kind"] = kind_label  # a meaning match's kind: 洗稿改写, 翻译（英文）
    app.jinja_env.globals["ui_languages"] = _LANGUAGE_NAMES
    app.jinja_env.globals["current_language"] = select_language
    app.add_url_rule("/language", "language", public(_language_switch), methods=["POST"])
