"""Per-work allowlist of licensed sites: a copy found on a site the rights holder licensed is recorded with
status ``licensed``, not flagged.

An entry is a host (``example.com``: the host and its subdomains, ``www.example.com``, ``m.example.com``) or a
host with a port (``127.0.0.1:8080``: exactly that site). The table is ``licensed_sites``
(:class:`storage.models.LicensedSite`).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from fptrack.storage.models import LicensedSite, Match, MatchStatus, Page, Work

__all__ = [
    "LicensedSite",
    "add_licensed_site",
    "is_licensed",
    "licensed_hosts",
    "licensed_hosts_of",
    "normalise_site",
]


def normalise_site(entry: str) -> str:
    """``https://WWW.Example.com/path`` -> ``www.example.com``; ``127.0.0.1:8080`` stays; raises ValueError on
    an entry with no host."""
    raw = entry.strip()
    parts = urlsplit(raw if "//" in raw else f"//{raw}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{entry!r}: not a host or host:port") from None
    host = (parts.hostname or "").lower().rstrip(".")
    if not host or " " in host:
        raise ValueError(f"{entry!r}: not a host or host:port")
    return f"{host}:{port}" if port else host


def is_licensed(url: str, sites: list[str] | tuple[str, ...] | set[str]) -> bool:
    """True when ``url`` is on one of ``sites`` (normalised entries, see the module docstring)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    with_port = f"{host}:{parts.port}" if parts.port else host
    for site in sites:
        if ":" in site:
            if with_port == site:
                return True
        elif host == site or host.endswith("." + site):
            return True
    return False


def licensed_hosts(session: Session, work_id: int) -> list[str]:
    return list(
        session.scalars(
            select(LicensedSite.site).where(LicensedSite.work_id == work_id).order_by(LicensedSite.site)
        )
    )


def licensed_hosts_of(session: Session, work_ids: Iterable[int]) -> dict[int, list[str]]:
    """:func:`licensed_hosts` of each of ``work_ids`` (every one a key, [] when it licenses no site), in one
    query."""
    hosts: dict[int, list[str]] = {work_id: [] for work_id in work_ids}
    if hosts:
        rows = session.execute(
            select(LicensedSite.work_id, LicensedSite.site)
            .where(LicensedSite.work_id.in_(sorted(hosts)))
            .order_by(LicensedSite.work_id, LicensedSite.site)
        )
        for work_id, site in rows:
            hosts[int(work_id)].append(str(site))
    return hosts


def add_licensed_site(session: Session, work_id: int, entry: str) -> int:
    """Allow ``entry`` for work ``work_id``; matches already flagged on that site become ``licensed``. Returns
    the number of matches relabelled."""
    if session.get(Work, work_id) is None:
        raise LookupError(f"no work with id {work_id}")
    site = normalise_site(entry)
    if (
        session.scalar(select(LicensedSite).where(LicensedSite.work_id == work_id, LicensedSite.site == site))
        is None
    ):
        session.add(LicensedSite(work_id=work_id, site=site))
        session.flush()
    relabel = [
        match_id
        for match_id, url in session.execute(
            select(Match.id, Page.url)
            .join(Page, Page.id == Match.page_id)
            .where(Match.work_id == work_id, Match.status == MatchStatus.FLAGGED)
        )
        if is_licensed(url, [site])
    ]
    if relabel:
        session.execute(update(Match).where(Match.id.in_(relabel)).values(status=MatchStatus.LICENSED))
    return len(relabel)
