"""A process's set-up (``jobs.bootstrap``): every entry point's settings reach the table cache, the chapter
index and the database the same way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fptrack.compare import index_config
from fptrack.core.settings import Settings
from fptrack.fingerprint.table_files import table_cache_file, use_table_cache
from fptrack.jobs.bootstrap import open_sessions, prepare_process
from fptrack.storage.db import SchemaOutOfDate, migrate


@pytest.fixture
def restored() -> Iterator[None]:
    """This process's set-up as the other tests expect it, whatever a test here pointed it at."""
    before = index_config.configured()
    mode, folder = before.mode, before.folder
    yield
    use_table_cache(None)
    index_config.configure(mode=mode, folder=folder)


def test_the_settings_folders_reach_the_table_cache_and_the_chapter_index(
    tmp_path: Path, restored: None
) -> None:
    prepare_process(Settings(data_dir=tmp_path, cache_dir=tmp_path / "cache", chapter_index="database"))
    assert (index_config.configured().mode, index_config.configured().folder) == (
        "database",
        tmp_path / "cache" / "chapter-index",
    )
    kept = table_cache_file("normalise", __file__, ".npy")
    assert kept is not None and kept.parent == tmp_path / "cache"

    prepare_process(Settings(data_dir=tmp_path, cache_dir=None, chapter_index="memory"))
    assert (index_config.configured().mode, index_config.configured().folder) == ("memory", None)
    assert table_cache_file("normalise", __file__, ".npy") is None


def test_sessions_open_only_on_a_migrated_database(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with pytest.raises(SchemaOutOfDate, match="fptrack init"):
        open_sessions(settings)
    open_sessions(settings, require_schema=False)  # what `fptrack init` itself needs
    migrate(settings)
    with open_sessions(settings)() as session:
        assert session.get_bind().url.database == str(tmp_path / "fptrack.db")
