"""The normalisation table cached on disk is the table built from scratch."""

from pathlib import Path

import numpy as np
import pytest

from fingerprint import normalize as module


def test_cached_table_equals_the_built_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FPTRACK_CACHE_DIR", str(tmp_path))
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


def test_a_damaged_cache_file_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FPTRACK_CACHE_DIR", str(tmp_path))
    module._table.cache_clear()
    try:
        path = module._table_cache_path()
        assert path is not None
        path.write_bytes(b"not an npz file")
        assert module.normalize("內(nèi)容").text == "内容"
        assert path.stat().st_size > 1_000_000  # replaced by a good table
    finally:
        module._table.cache_clear()
