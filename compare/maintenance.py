"""Upkeep of the store, run by ``fptrack maintain`` and, with workers, by Celery beat on a schedule.

- Re-split overloaded Simhash buckets (boilerplate pages make them; ALGORITHMS.md section 4) so that look-ups
  stay fast: :func:`storage.hot_buckets.split_hot_buckets`.
- Fold new chapters and pages into the corpus statistics: :func:`compare.corpus.refresh_corpus_stats`.
- Retire the fingerprints of pages gone for good (``FPTRACK_RETAIN_GONE_DAYS``,
  ``FPTRACK_RETAIN_UNSEEN_DAYS``): :func:`storage.housekeeping.retire_page_fingerprints`; matches and evidence
  stay.
- Keep empty ``page_codes`` ranges ahead of the page ids when it is partitioned (``fptrack db partition``):
  :func:`storage.partitions.ensure_partitions_ahead`, first and in a transaction of its own, so that its
  short locks are not held through the rest of the upkeep.
- Count orphaned index rows (there should be none).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from fptrack.compare.corpus import CorpusRefresh, refresh_corpus_stats
from fptrack.compare.service import layout_for
from fptrack.core.settings import Settings
from fptrack.storage.hot_buckets import HotBucketReport, split_hot_buckets
from fptrack.storage.housekeeping import count_orphans, retire_page_fingerprints
from fptrack.storage.models import utcnow
from fptrack.storage.partitions import PartitionError, ensure_partitions_ahead

__all__ = ["MaintenanceReport", "run_maintenance"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MaintenanceReport:
    buckets: HotBucketReport
    corpus: CorpusRefresh
    orphans: dict[str, int]
    retired: int = 0  # pages whose fingerprints were retired (gone for good)
    partitions_added: tuple[str, ...] = ()  # page_codes ranges created ahead of the page ids

    def as_json(self) -> dict[str, object]:
        return {
            "fingerprints": self.buckets.fingerprints,
            "buckets_split": len(self.buckets.split),
            "rows_filed": self.buckets.rows_filed,
            "documents_added": self.corpus.documents_added,
            "documents": self.corpus.documents,
            "pages_retired": self.retired,
            "partitions_added": list(self.partitions_added),
            "orphans": {name: count for name, count in self.orphans.items() if count},
        }


def run_maintenance(session: Session, settings: Settings) -> MaintenanceReport:
    bind = session.get_bind()
    try:
        added = ensure_partitions_ahead(bind if isinstance(bind, Engine) else session).ranges
    except (PartitionError, OperationalError) as error:
        # a lock not granted in time (a long transaction on page_codes) or a range in the way: the next run
        # tries again, and pages past the last range meanwhile land in the DEFAULT partition; the rest of the
        # upkeep still runs
        log.warning("page_codes ranges ahead not added this time: %s", str(error).splitlines()[0])
        added = ()
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
    return MaintenanceReport(
        buckets, corpus, count_orphans(session), retired, tuple(name for name, _, _ in added)
    )


def _days_before(now: datetime, days: float) -> datetime | None:
    return now - timedelta(days=days) if days > 0 else None
