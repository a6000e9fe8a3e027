"""Teams' guaranteed minimum and cap, their learned unit demands, and each round's per-team utility (2026-11-29).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COLUMNS = ("min_usd_per_hour", "max_usd_per_hour", "demand_low_usd_per_hour", "demand_high_usd_per_hour",
            "demand_theta_max_usd_per_hour")


def upgrade() -> None:
    """Add to ``teams``: ``min_usd_per_hour`` and ``max_usd_per_hour`` (SV14), the learned unit demand's interval
    ``demand_low_usd_per_hour``, ``demand_high_usd_per_hour``, its bound ``demand_theta_max_usd_per_hour`` and
    ``demand_probes`` (all nullable: none set, nothing learned)."""
    with op.batch_alter_table("teams") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Float, nullable=True))
        batch.add_column(sa.Column("demand_probes", sa.Integer, nullable=True))
    with op.batch_alter_table("org_rounds") as batch:  # per team: useful USD/hour and its entitlement-only one
        batch.add_column(sa.Column("utility_json", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("org_rounds") as batch:
        batch.drop_column("utility_json")
    with op.batch_alter_table("teams") as batch:
        batch.drop_column("demand_probes")
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
