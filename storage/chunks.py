"""Ids in statement-sized chunks: the bound parameters of one ``IN (...)``. A module of its own, without
numpy or the models, for every layer that queries by ids (the crawl's page store among them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["CHUNK", "id_chunks"]

CHUNK = 2000  # bound parameters per statement (SQLite allows 32,766; PostgreSQL 65,535)


def id_chunks(ids: Iterable[int], size: int = CHUNK) -> Iterator[list[int]]:
    """``ids`` distinct and sorted, in lists of at most ``size``: the bound parameters of one ``IN (...)``."""
    unique = sorted(set(ids))
    for start in range(0, len(unique), size):
        yield unique[start : start + size]
