"""The gateway's first tables: tenants, API keys (digests only), audit events and the
durable daily counters (quota use, token spend).

Revision ID: g0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "g0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "gateway_tenants",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "gateway_api_keys",
        sa.Column("key_id", sa.String(8), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("tenant", sa.String(64), sa.ForeignKey("gateway_tenants.name"), nullable=False),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("collections", sa.JSON(), nullable=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_gateway_api_keys_tenant", "gateway_api_keys", ["tenant"])
    op.create_table(
        "gateway_audit_events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=True),
        sa.Column("key_id", sa.String(32), nullable=True),
        sa.Column("route", sa.String(200), nullable=False),
        sa.Column("outcome", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("detail", sa.String(500), nullable=False),
    )
    op.create_index("ix_gateway_audit_events_tenant_at", "gateway_audit_events", ["tenant", "at"])
    op.create_table(
        "gateway_daily_counters",
        sa.Column("day", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("bucket", sa.String(100), primary_key=True),
        sa.Column("used", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_daily_counters")
    op.drop_index("ix_gateway_audit_events_tenant_at", table_name="gateway_audit_events")
    op.drop_table("gateway_audit_events")
    op.drop_index("ix_gateway_api_keys_tenant", table_name="gateway_api_keys")
    op.drop_table("gateway_api_keys")
    op.drop_table("gateway_tenants")
