"""One set-up per process: what every entry point does with its settings before it works. The command
line (:func:`cli.main.main`), a Celery worker or beat (:func:`jobs.tasks.configure`), a site's crawl in a
process of its own (``python -m fptrack.jobs.site_crawl``) and the admin's app factory
(:func:`admin.web.create_app`) call :func:`prepare_process`; those that work on the database open it with
:func:`open_sessions`.

Light on purpose: a crawl's process imports neither numpy nor the compare service for it."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from fptrack.compare import index_config
from fptrack.core.settings import Settings
from fptrack.fingerprint.table_files import use_table_cache
from fptrack.storage.db import check_schema, create_engine_for, session_factory

__all__ = ["open_sessions", "prepare_process"]


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
