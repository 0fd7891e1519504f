"""contract: registered works are indexed again under the one fingerprint contract

The winnowing over pinyin initials moved from k = 16 to k = 12 (``fingerprint.contract``) and pinyin DNA left
the page path, so chapter fingerprints stored by an earlier release no longer meet the codes of pages
fingerprinted now. No schema change: every work is marked not indexed, and the sweep (``fptrack maintain``,
the workers' beat, a crawl) indexes it again with ``jobs.retroactive.index_and_recheck``, which rewrites only
fingerprints and index rows (derived data) and compares the pages that share codes with it. Pages are
fingerprinted again when they are crawled again.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 06:00:00
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE works SET indexed_at = NULL")


def downgrade() -> None:
    # The earlier release indexes with its own parameters: let its sweep index every work again as well.
    op.execute("UPDATE works SET indexed_at = NULL")
