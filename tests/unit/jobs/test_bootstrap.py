"""A process's set-up (``jobs.bootstrap``): every entry point's settings reach the table cache, the chapter
index and the database the same way."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from fptrack.compare import index_config
from fptrack.core.settings import Settings
from fptrack.fingerprint.table_files import table_cache_file, use_table_cache
from fptrack.jobs.bootstrap import collector_paused, open_sessions, prepare_process
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


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """The collector on and nothing frozen after the test, as the other tests expect it."""
    yield
    gc.unfreeze()
    gc.enable()


def test_the_collector_is_paused_through_a_set_up_and_what_it_made_frozen(collector_restored: None) -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    with collector_paused():
        assert not gc.isenabled()
        made = [[index] for index in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(made)
    collected = {id(item) for generation in range(3) for item in gc.get_objects(generation)}
    assert not any(id(item) in collected for item in made)  # out of every generation the collector walks


def test_a_failed_set_up_turns_the_collector_on_again_and_a_paused_one_stays_off(
    collector_restored: None,
) -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("set-up failed")
    assert gc.isenabled()
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
