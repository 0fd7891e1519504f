"""One set-up per process: what every entry point does with its settings before it works. The command
line (:func:`cli.main.main`), a Celery worker or beat (:func:`jobs.tasks.configure`), a site's crawl in a
process of its own (``python -m fptrack.jobs.site_crawl``) and the admin's app factory
(:func:`admin.web.create_app`) call :func:`prepare_process`; those that work on the database open it with
:func:`open_sessions`; a worker before its pool forks, and the embedded crawl's compare process, load ahead
what their first page needs with :func:`warm_up`.

Light on purpose: a crawl's process imports neither numpy nor the compare service for it."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare import index_config
from fptrack.core.settings import Settings
from fptrack.fingerprint.table_files import use_table_cache
from fptrack.storage.db import check_schema, create_engine_for, session_factory, session_scope

__all__ = ["WARM_UP_PAGE", "collector_paused", "open_sessions", "prepare_process", "warm_up"]

log = logging.getLogger(__name__)


def prepare_process(settings: Settings) -> None:
    """Make this process use the folders and modes of ``settings``: the per-code-point tables kept in its
    cache folder (:func:`fingerprint.table_files.use_table_cache`), the chapter index's mode and files
    (:func:`compare.index_config.configure`). Calling it again with other settings switches to them."""
    use_table_cache(settings.cache_dir)
    index_config.configure(settings)


def open_sessions(settings: Settings, *, require_schema: bool = True) -> sessionmaker[Session]:
    """Sessions on the database of ``settings``, through an engine of this process's own; with
    ``require_schema``, :class:`storage.db.SchemaOutOfDate` (or ``DatabaseUnavailable``) first, when the
    database is not migrated to this code's schema (or not reachable)."""
    engine = create_engine_for(settings)
    if require_schema:
        check_schema(engine, settings)
    return session_factory(engine)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block sets the process up, and every object alive at
    its end frozen out of the collector's reach (:func:`gc.freeze`) before it is on again (if it was).

    A start-up's imports and set-up allocate objects by the hundred thousand (modules, classes, Scrapy's and
    SQLAlchemy's registries) that live as long as the process; the collections their allocation triggers
    walk them again and again to free next to nothing: 0.09 of the 0.14 s of CPU a crawl's process spends
    collecting before its first request, in the crawl command's set-up alone."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


WARM_UP_PAGE = "青石巷里的老槐树下，住着一位修伞的老人。他说 Chapter 1 的故事要从 2026 年讲起。" * 8
"""Han, Latin and digits; longer than a page must be to get a Simhash (``networks.MIN_PAGE_CHARS``)."""


def warm_up(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Load in this process what comparing its first page would load: the normaliser's and the pinyin
    initials' per-code-point tables, rjieba's dictionary (the page Simhash), and the registry's codes
    (:mod:`compare.chapter_index`, read by comparing a sample page; reads only). A registry that cannot be
    read now is left to the first page, which says why."""
    # the compare code, loaded here only: the set-up of a process that never compares stays light
    from fptrack.compare.networks import page_simhash
    from fptrack.compare.service import compare_document
    from fptrack.fingerprint.text_fingerprints import fingerprint_text

    document = fingerprint_text(WARM_UP_PAGE)
    page_simhash(WARM_UP_PAGE)
    try:
        with session_scope(sessions) as session:
            compare_document(session, document, settings)
    except Exception:  # the first page loads it, and reports what fails
        log.debug("reading the registry ahead of the first page failed", exc_info=True)
