"""Conversations, their answers and the feedback on them (db/conversation_tables.py).

Revision ID: g0002
Revises: g0001
"""

import sqlalchemy as sa
from alembic import op

revision = "g0002"
down_revision = "g0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_conversations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("end_user", sa.String(256), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("client", sa.String(160), nullable=False),
        sa.Column("collection", sa.String(64), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_gateway_conversations_owner",
        "gateway_conversations",
        ["tenant", "end_user", "updated_at"],
    )
    op.create_index("ix_gateway_conversations_updated_at", "gateway_conversations", ["updated_at"])
    op.create_table(
        "gateway_answers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("gateway_conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("collection", sa.String(64), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("question_key", sa.String(200), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("citations", sa.JSON(), nullable=False),
        sa.Column("withheld", sa.JSON(), nullable=False),
        sa.Column("stages", sa.JSON(), nullable=False),
        sa.Column("supported", sa.Integer(), nullable=False),
        sa.Column("low_evidence", sa.Boolean(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_gateway_answers_conversation", "gateway_answers", ["conversation_id", "created_at"]
    )
    op.create_index(
        "ix_gateway_answers_report", "gateway_answers", ["tenant", "collection", "created_at"]
    )
    op.create_table(
        "gateway_feedback",
        sa.Column(
            "answer_id",
            sa.String(32),
            sa.ForeignKey("gateway_answers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("rater", sa.String(512), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_feedback")
    op.drop_table("gateway_answers")
    op.drop_table("gateway_conversations")
