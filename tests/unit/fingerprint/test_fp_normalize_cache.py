"""The normalisation table cached on disk is the table built from scratch."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fptrack.fingerprint import normalize as module
from fptrack.fingerprint import table_files


@pytest.fixture(autouse=True)
def _restore_cache_folder() -> Iterator[None]:
    before = table_files._cache_dir
    yield
    module.use_table_cache(before)


def test_cached_table_equals_the_built_one(tmp_path: Path) -> None:
    module.use_table_cache(tmp_path)
    module._table.cache_clear()
    try:
        built = module._table()  # builds and saves
        assert list(tmp_path.glob("normalize-*.npz"))
        module._table.cache_clear()
        loaded = module._table()  # loads
        assert loaded is not built
        assert np.array_equal(loaded.single, built.single) and np.array_equal(loaded.length, built.length)
        assert loaded.expansions == built.expansions and loaded.expansions
    finally:
        module._table.cache_clear()


def test_a_damaged_cache_file_is_rebuilt(tmp_path: Path) -> None:
    module.use_table_cache(tmp_path)
    module._table.cache_clear()
    try:
        path = module._table_cache_path()
        assert path is not None
        path.write_bytes(b"not an npz file")
        assert module.normalize("內(nèi)容").text == "内容"
        assert path.stat().st_size > 1_000_000  # replaced by a good table
    finally:
        module._table.cache_clear()


def test_without_a_cache_folder_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure module writes no file unless an entry point names a folder (the settings'
    FPTRACK_CACHE_DIR)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    module.use_table_cache(None)
    module._table.cache_clear()
    try:
        assert module._table_cache_path() is None
        assert module.normalize("內容").text == "内容"
        assert list(tmp_path.rglob("*")) == []
    finally:
        module._table.cache_clear()
