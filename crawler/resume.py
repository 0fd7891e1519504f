"""Resumable site crawls: a managed site's crawl keeps its frontier on disk, so a crawl killed outright
(SIGKILL, a crash, a reboot) and started again continues where it stopped instead of starting from the start
page.

Scrapy's own ``JOBDIR`` is not used: it survives a graceful stop only (its queue's pointers are written when
the spider closes). Here every request the spider makes is a row of one SQLite file, committed before the page
that links to it can reach the database; a page is *done* when the database holds it from one of the state's
crawl jobs (``pages.crawl_job_id``), which the resuming crawl reads back. Hence: a page stored before the kill
is not fetched again, a page fetched but not yet stored is, and no link of a stored page is lost.

Layout: ``<data dir>/crawl-state/site-<id>/frontier.sqlite`` (one state per site; the site's claim,
:func:`jobs.site_runs.claim`, keeps one crawl at a time on it)::

    meta(name, value)            'key': the hash of the crawl's parameters (:func:`state_key`)
    jobs(id)                     the crawl jobs that crawled from this state, oldest first
    frontier(seq, url, depth, start)   every request made, in the order made (breadth first)

A crawl with other parameters (start URLs, depth, allowed hosts, include/exclude) discards the state and
starts afresh. The state is removed when a crawl ends normally (frontier exhausted, or page budget spent); a
crawl that was interrupted, failed or killed leaves it for the next one."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from fptrack.crawler.pages import CrawlOptions
from fptrack.storage.sites import site_of

__all__ = ["STATE_DIR", "CrawlState", "state_dir", "state_key"]

log = logging.getLogger(__name__)

STATE_DIR = "crawl-state"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS frontier (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL UNIQUE, depth INTEGER NOT NULL, \
start INTEGER NOT NULL
);
"""


def state_dir(data_dir: Path, site_id: int) -> Path:
    """Where the crawl state of site ``site_id`` lives (``fptrack sites`` docs point users here to discard
    it)."""
    return data_dir / STATE_DIR / f"site-{site_id}"


def state_key(start_urls: Sequence[str], depth: int, options: CrawlOptions) -> str:
    """A hash of what decides which requests a crawl makes: a state made under other parameters is stale. The
    page budget is not part of it: a resumed crawl spends what the earlier runs left of the current budget."""
    parameters = {
        "start_urls": list(start_urls),
        "depth": depth,
        "allowed_hosts": sorted(options.allowed_hosts),
        "include": list(options.include),
        "exclude": list(options.exclude),
    }
    return hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()[:32]


class CrawlState:
    """The on-disk frontier of one site's crawl (see the module docstring). Written from the reactor's thread
    (the spider) and read from the crawl job's; never at the same time, hence one connection."""

    def __init__(self, directory: Path, connection: sqlite3.Connection, *, resumed: bool) -> None:
        self.directory = directory
        self._db = connection
        self.resumed = resumed  # an earlier crawl left this state: this crawl continues it
        # URLs the earlier runs stored (filled by the crawl job from the database)
        self.done: set[str] = set()

    @classmethod
    def open(cls, data_dir: Path, site_id: int, key: str) -> CrawlState:
        """The site's state for a crawl with parameters ``key``: the one an interrupted crawl left, or a new
        one (a state with another key is discarded, and the log says so)."""
        directory = state_dir(data_dir, site_id)
        path = directory / "frontier.sqlite"
        if path.exists():
            try:
                found = cls._connect(path)
                row = found.execute("SELECT value FROM meta WHERE name = 'key'").fetchone()
                jobs = found.execute("SELECT count(*) FROM jobs").fetchone()[0]
            except sqlite3.DatabaseError as error:
                log.warning("discarding the unreadable crawl state in %s (%s)", directory, error)
            else:
                if row is not None and row[0] == key and jobs:
                    return cls(directory, found, resumed=True)
                found.close()
                if row is not None and row[0] != key:
                    log.warning(
                        "discarding the crawl state in %s: it was made with other crawl settings", directory
                    )
            shutil.rmtree(directory)
        directory.mkdir(parents=True, exist_ok=True)
        connection = cls._connect(path)
        with connection:
            connection.execute("INSERT INTO meta (name, value) VALUES ('key', ?)", (key,))
        return cls(directory, connection, resumed=False)

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        connection = sqlite3.connect(path, check_same_thread=False)
        # WAL with synchronous=NORMAL: a committed row survives the process being killed (not a power cut)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        return connection

    def earlier_jobs(self) -> list[int]:
        """The crawl jobs that crawled from this state before (the killed ones), oldest first."""
        return [int(row[0]) for row in self._db.execute("SELECT id FROM jobs ORDER BY id")]

    def add_job(self, job_id: int) -> None:
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO jobs (id) VALUES (?)", (job_id,))

    def record(self, requests: Iterable[tuple[str, int]], *, start: bool = False) -> list[str]:
        """Record ``(url, depth)`` requests before they are made; returns the URLs not recorded before, in
        order (the others were requested by this crawl or an earlier run of it already). Committed on
        return."""
        new: list[str] = []
        with self._db:
            for url, depth in requests:
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO frontier (url, depth, start) VALUES (?, ?, ?)",
                    (url, depth, int(start)),
                )
                if cursor.rowcount:
                    new.append(url)
        return new

    def pending(self) -> list[tuple[str, int, bool]]:
        """``(url, depth, start)`` of the requests recorded and not done, in the order they were made."""
        rows = self._db.execute("SELECT url, depth, start FROM frontier ORDER BY seq")
        return [(str(url), int(depth), bool(start)) for url, depth, start in rows if url not in self.done]

    def sites(self) -> set[str]:
        """The site keys of every recorded request: sites the crawl was allowed to reach (a start URL
        redirected to ``www.``, for one), which a resumed crawl may reach again without fetching the redirect
        again."""
        return {site_of(str(url)) for (url,) in self._db.execute("SELECT url FROM frontier")} - {""}

    def close(self) -> None:
        self._db.close()

    def remove(self) -> None:
        """The crawl ended normally: nothing to resume."""
        self._db.close()
        shutil.rmtree(self.directory, ignore_errors=True)
