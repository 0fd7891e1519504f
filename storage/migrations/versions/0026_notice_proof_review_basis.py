"""notices: proof of what was sent (the raw message, its SHA-256, the relay's reply, a time-stamp token);
reviews: the reviewer's basis (copy kind, fair use / licence considered); host contacts of kind
designated_agent

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29 16:20:00
"""

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
