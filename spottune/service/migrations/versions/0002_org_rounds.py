"""Fair-share rounds of the org budget, and each study's cap (2026-11-29).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``org_rounds`` and ``studies.max_usd_per_hour``."""
    op.create_table(
        "org_rounds",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("at_utc", sa.DateTime(timezone=True), nullable=False),
        sa.Column("study_id", sa.Integer, sa.ForeignKey("studies.id"), nullable=True),
        sa.Column("budget_usd_per_hour", sa.Float, nullable=False),
        sa.Column("allocations_json", sa.Text, nullable=False),
        sa.Column("demands_json", sa.Text, nullable=False),
        sa.Column("unallocated", sa.Float, nullable=False),
        sa.Column("over_allocated", sa.Float, nullable=False),
        sa.Column("unmet", sa.Float, nullable=False),
        sa.Column("loss", sa.Float, nullable=False),
    )
    with op.batch_alter_table("studies") as batch:
        batch.add_column(sa.Column("max_usd_per_hour", sa.Float, nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("studies") as batch:
        batch.drop_column("max_usd_per_hour")
    op.drop_table("org_rounds")
