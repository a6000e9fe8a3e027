"""Teams, studies and the org budget (2026-11-29).

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the three tables."""
    op.create_table(
        "org",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("budget_usd_per_hour", sa.Float, nullable=True),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("entitlement", sa.Float, nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_utc", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "studies",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("team_id", sa.Integer, sa.ForeignKey("teams.id"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("trial_budget", sa.Integer, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("summary_json", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_utc", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_utc", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_utc", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("team_id", "name", name="uq_studies_team_name"),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("studies")
    op.drop_table("teams")
    op.drop_table("org")
