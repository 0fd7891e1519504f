"""The evidence bundle attached to a takedown notice, one per named match: the admin's external bundle
(:func:`admin.evidence_bundle.build_bundle`: the page as fetched, signed, timestamped when a time-stamping
authority is configured, without internal notes or user names).

The drafting code (:func:`jobs.notices.draft_notice`) sits a layer below the admin and cannot import it: the
admin and the CLI hand it :func:`notice_bundles` as its ``bundle_of``."""

from __future__ import annotations

from sqlalchemy.orm import Session

from fptrack.admin.evidence_bundle import build_bundle
from fptrack.core.settings import Settings
from fptrack.jobs.notices import BundleMaker
from fptrack.storage.models import Match

__all__ = ["notice_bundles"]


def notice_bundles(settings: Settings) -> BundleMaker:
    """A ``bundle_of`` for :func:`jobs.notices.draft_notice` that makes each match's bundle with the
    installation's key and time-stamping authority (``settings``)."""

    def bundle_of(session: Session, match: Match) -> bytes:
        return build_bundle(session, match.id, settings)

    return bundle_of
