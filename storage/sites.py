"""Sites: the one definition of "the site of a URL", and the ``sites`` rows keyed by it."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from fptrack.storage.models import Site

__all__ = ["site_ids", "site_of"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def site_of(url: str) -> str:
    """The site a URL belongs to: lower-case host, plus the port when it is not the scheme's default.

    ``http://Example.com/a`` and ``https://example.com:443/b`` are one site (a site moving to https stays one
    site); ``http://127.0.0.1:8001`` and ``http://127.0.0.1:8002`` are two. Returns ``''`` for URLs that are
    not http(s) or have no host. The crawler's scope, the site-template rule, licensing and ``sites.host`` all
    use it."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host:
        return ""
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return host
    return f"{host}:{port}"


def site_ids(session: Session, keys: Iterable[str]) -> dict[str, int]:
    """The ``sites`` id of every site key (see :func:`site_of`), creating missing rows.

    ``INSERT ... ON CONFLICT DO NOTHING``: two crawls meeting a new site at once both get its one row.
    """
    wanted = sorted({key.strip().lower()[:255] for key in keys if key and key.strip()})
    if not wanted:
        return {}
    found = _lookup(session, wanted)
    missing = [key for key in wanted if key not in found]
    if missing:
        dialect = session.get_bind().dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        session.execute(
            insert(Site).values([{"host": key, "name": key} for key in missing]).on_conflict_do_nothing()
        )
        found.update(_lookup(session, missing))
    return found


def _lookup(session: Session, keys: list[str]) -> dict[str, int]:
    return {
        host: site_id
        for host, site_id in session.execute(select(Site.host, Site.id).where(Site.host.in_(keys)))
    }
