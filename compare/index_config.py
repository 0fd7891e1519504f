"""This process's chapter index mode (``FPTRACK_CHAPTER_INDEX``) and file cache folder, which
:mod:`compare.chapter_index` reads. A module of its own, without numpy: every command configures it, and a
crawl's process, which leaves comparing to a child or to workers, should not import the index for that."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fptrack.core.settings import CHAPTER_INDEX_MODES, Settings

__all__ = ["IndexConfig", "configure", "configured", "on_configure"]


@dataclass
class IndexConfig:
    mode: str = "memory"
    folder: Path | None = None


_config = IndexConfig()
_lock = threading.Lock()
_forget: list[Callable[[], None]] = []


def on_configure(forget: Callable[[], None]) -> None:
    """Have ``forget`` called at every :func:`configure` (:mod:`compare.chapter_index`: its indexes)."""
    _forget.append(forget)


def configure(
    settings: Settings | None = None, *, mode: str | None = None, folder: Path | None = None
) -> None:
    """Set this process's mode (``FPTRACK_CHAPTER_INDEX``) and file cache folder, from ``settings`` (its
    ``chapter_index`` and ``<cache_dir>/chapter-index``) or given directly (no folder: no files); the indexes
    held are forgotten. Entry points call it beside :func:`fingerprint.table_files.use_table_cache`.

    ``configure()`` without arguments goes back to what a process that never called it has: the defaults
    (``memory``, no files)."""
    with _lock:
        for forget in _forget:
            forget()
        if settings is not None:
            mode = settings.chapter_index if mode is None else mode
            if folder is None and settings.cache_dir is not None:
                folder = settings.cache_dir / "chapter-index"
        mode = mode or "memory"
        if mode not in CHAPTER_INDEX_MODES:
            raise ValueError(
                f"chapter index mode must be one of {', '.join(CHAPTER_INDEX_MODES)}, got {mode!r}"
            )
        _config.mode, _config.folder = mode, folder


def configured() -> IndexConfig:
    """This process's configuration: what its entry point configured, else the defaults."""
    return _config
