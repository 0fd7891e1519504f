"""The pinyin initials' table cached on disk (beside the normaliser's) is the table built from scratch."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fptrack.fingerprint import pinyin, table_files


@pytest.fixture(autouse=True)
def _restore_cache_folder() -> Iterator[None]:
    before = table_files._cache_dir
    pinyin._initial_table.cache_clear()
    yield
    table_files.use_table_cache(before)
    pinyin._initial_table.cache_clear()


def test_cached_initials_table_equals_the_built_one(tmp_path: Path) -> None:
    table_files.use_table_cache(tmp_path)
    built = pinyin._initial_table()  # builds and saves
    (saved,) = tmp_path.glob("pinyin-initials-*.npy")
    pinyin._initial_table.cache_clear()
    loaded = pinyin._initial_table()  # loads
    assert loaded is not built and np.array_equal(loaded, built)
    assert pinyin.pinyin_initials("青石巷里的老槐树abc9") == "qsxldlhsabc9"
    saved.write_bytes(b"damaged")  # a damaged file is built again, and replaced
    pinyin._initial_table.cache_clear()
    assert np.array_equal(pinyin._initial_table(), built)
    assert saved.stat().st_size > 1_000_000


def test_without_a_cache_folder_no_file_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    table_files.use_table_cache(None)
    assert pinyin._initial_table_path() is None
    assert pinyin.pinyin_initials("内容") == "nr"
    assert list(tmp_path.rglob("*")) == []
