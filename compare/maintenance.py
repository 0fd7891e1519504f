"""Upkeep of the store, run by ``fptrack maintain`` and, with workers, by Celery beat on a schedule.

- Re-split overloaded Simhash buckets (boilerplate pages make them; ALGORITHMS.md section 4) so that look-ups
  stay fast: :func:`storage.hot_buckets.split_hot_buckets`.
- Fold new chapters and pages into the corpus statistics: :func:`compare.corpus.refresh_corpus_stats`.
- Retire the fingerprints of pages gone for good (``FPTRACK_RETAIN_GONE_DAYS``,
  ``FPTRACK_RETAIN_UNSEEN_DAYS``): :func:`storage.housekeeping.retire_page_fingerprints`; matches and evidence
  stay.
- Count orphaned index rows (there should be none).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from fptrack.compare.corpus import CorpusRefresh, refresh_corpus_stats
from fptrack.compare.service import layout_for
from fptrack.core.settings import Settings
from fptrack.storage.hot_buckets import HotBucketReport, split_hot_buckets
from fptrack.storage.housekeeping import count_orphans, retire_page_fingerprints
from fptrack.storage.models import utcnow

__all__ = ["MaintenanceReport", "run_maintenance"]


@dataclass(frozen=True)
class MaintenanceReport:
    buckets: HotBucketReport
    corpus: CorpusRefresh
    orphans: dict[str, int]
    retired: int = 0  # pages whose fingerprints were retired (gone for good)

    def as_json(self) -> dict[str, object]:
        return {
            "fingerprints": self.buckets.fingerprints,
            "buckets_split": len(self.buckets.split),
            "rows_filed": self.buckets.rows_filed,
            "documents_added": self.corpus.documents_added,
            "documents": self.corpus.documents,
            "pages_retired": self.retired,
            "orphans": {name: count for name, count in self.orphans.items() if count},
        }


def run_maintenance(session: Session, settings: Settings) -> MaintenanceReport:
    buckets = split_hot_buckets(
        session, layout_for(settings), mu=settings.simhash_hot_mu, min_size=settings.simhash_hot_min_size
    )
    corpus = refresh_corpus_stats(session)
    now = utcnow()
    retired = retire_page_fingerprints(
        session,
        gone_before=_days_before(now, settings.retain_gone_days),
        unseen_before=_days_before(now, settings.retain_unseen_days),
    )
    return MaintenanceReport(buckets, corpus, count_orphans(session), retired)


def _days_before(now: datetime, days: float) -> datetime | None:
    return now - timedelta(days=days) if days > 0 else None
