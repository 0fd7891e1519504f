"""Corpus statistics kept in the database and brought up to date incrementally.

IDF (document frequencies), left/right neighbour entropy and the pinyin-initial reference distribution are
computed from the registered chapters and the crawled pages (``fingerprint.stats.CorpusStats``), never shipped
as constants. Each refresh folds in only the documents added since the previous one: a watermark of the last
chapter and page ids is stored beside every version of the statistics.

The fingerprints that are *indexed* (tf-weighted Simhash and winnowing, ``fingerprint.contract.CONTRACT``)
depend on no statistics, so stored fingerprints never go stale as the statistics move, and nothing on the page
path reads them. They are folded in only by ``fptrack maintain`` (never by ``works add`` or a crawl) for the
weighting schemes that use them (``tfidf``, ``entropy``, ``termlen``, DNA with a reference: benchmarks, or a
future contract), which read the latest version through :func:`load_corpus_stats`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from fptrack.fingerprint.normalize import normalize
from fptrack.fingerprint.stats import CorpusStats
from fptrack.storage.compressed import has_text
from fptrack.storage.corpus_stats import latest_corpus_stats, save_corpus_stats
from fptrack.storage.models import Chapter, Page

__all__ = ["STATS_NAME", "CorpusRefresh", "load_corpus_stats", "refresh_corpus_stats"]

STATS_NAME = "corpus"
_WATERMARK = "corpus.watermark"
_BATCH = 200


@dataclass(frozen=True)
class CorpusRefresh:
    documents_added: int
    documents: int
    version: int | None  # None when nothing new was folded in


def load_corpus_stats(session: Session) -> CorpusStats | None:
    stored = latest_corpus_stats(session, STATS_NAME)
    return CorpusStats.from_bytes(stored.payload) if stored else None


def _watermark(session: Session) -> dict[str, int]:
    stored = latest_corpus_stats(session, _WATERMARK)
    return json.loads(stored.payload) if stored else {"chapter": 0, "page": 0}


def refresh_corpus_stats(session: Session) -> CorpusRefresh:
    """Fold every chapter and page (with text) added since the last refresh into the statistics."""
    stats = load_corpus_stats(session) or CorpusStats.empty()
    mark = _watermark(session)
    added = 0
    sources = (
        (
            "chapter",
            select(Chapter.id, Chapter.text).where(Chapter.id > mark["chapter"]).order_by(Chapter.id),
        ),
        (
            "page",
            select(Page.id, Page.text)
            .where(Page.id > mark["page"], Page.status == 200, has_text(Page.text))
            .order_by(Page.id),
        ),
    )
    for name, statement in sources:
        for rows in session.execute(statement.execution_options(yield_per=_BATCH)).partitions():
            stats = stats.update(normalize(text).text for _, text in rows)
            mark[name] = max(mark[name], max(row_id for row_id, _ in rows))
            added += len(rows)
    if not added:
        return CorpusRefresh(0, stats.documents, None)
    version = save_corpus_stats(session, STATS_NAME, stats.to_bytes(), document_count=stats.documents)
    save_corpus_stats(session, _WATERMARK, json.dumps(mark).encode(), document_count=stats.documents)
    return CorpusRefresh(added, stats.documents, version)
