"""Where the per-code-point tables of the fingerprint stage are kept (:mod:`fingerprint.normalize`'s, and
:mod:`fingerprint.pinyin`'s): one folder per process, which entry points set from the settings
(``FPTRACK_CACHE_DIR``). A module of its own, without numpy: every command sets the folder, and a crawl's
process, which never normalises a text itself, should not import the normaliser for that."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["save_table_file", "table_cache_file", "use_table_cache"]

_cache_dir: Path | None = None


def use_table_cache(folder: Path | None) -> None:
    """Keep the per-code-point tables in ``folder`` (``None``: build them in memory in every process).

    Building the normaliser's walks all 1.1M code points through NFKC and OpenCC: about a second, which every
    process would pay. The module never chooses a folder itself: entry points pass the one the settings name
    (``FPTRACK_CACHE_DIR``)."""
    global _cache_dir
    _cache_dir = folder


def table_cache_file(
    stem: str, source: str, suffix: str, *, packages: tuple[str, ...] = (), tags: tuple[str, ...] = ()
) -> Path | None:
    """Where a per-code-point table is kept in the folder :func:`use_table_cache` set (None: no folder),
    named after everything it depends on: the code of the module that builds it (``source``, its
    ``__file__``), the versions of ``packages`` and ``tags`` (e.g. Unicode's version); any change makes a
    new name, so a stale table is never read. Used by :mod:`fingerprint.normalize` and
    :mod:`fingerprint.pinyin`."""
    from importlib.metadata import PackageNotFoundError, version

    if _cache_dir is None:
        return None
    parts = [stem, hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16], *tags]
    for package in packages:
        try:
            parts.append(f"{package}{version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package}unknown")
    return _cache_dir / ("-".join(parts) + suffix)


def save_table_file(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write a table file whole or not at all (``write`` fills a temporary file, renamed over ``path``:
    processes starting together see the old file or the whole new one); a folder that cannot be written
    only costs the next process the build."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=path.suffix, delete=False) as handle:
            write(handle)
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only home: build the table in every process, as before
