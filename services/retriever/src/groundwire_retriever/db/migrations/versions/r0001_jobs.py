"""The retriever's first tables: jobs, their per-document reports and a queued ingest
job's documents (see ``groundwire_retriever.db.jobs``).

Revision ID: r0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "r0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retriever_jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("collection", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=False),
        sa.Column("counts", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("delta", sa.Text(), nullable=True),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("input_bytes", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_retriever_jobs_collection", "retriever_jobs", ["collection", "created_at"])
    op.create_index("ix_retriever_jobs_tenant", "retriever_jobs", ["tenant", "state"])
    op.create_index("ix_retriever_jobs_state", "retriever_jobs", ["state", "created_at"])
    # one running job per collection across every replica, whatever a claim decided
    op.create_index(
        "ux_retriever_jobs_one_running",
        "retriever_jobs",
        ["collection"],
        unique=True,
        postgresql_where=sa.text("state = 'running'"),
        sqlite_where=sa.text("state = 'running'"),
    )
    op.create_table(
        "retriever_job_documents",
        sa.Column(
            "job_id",
            sa.String(32),
            sa.ForeignKey("retriever_jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("source_id", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
    )
    op.create_table(
        "retriever_job_inputs",
        sa.Column(
            "job_id",
            sa.String(32),
            sa.ForeignKey("retriever_jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("fields", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("retriever_job_inputs")
    op.drop_table("retriever_job_documents")
    op.drop_index("ux_retriever_jobs_one_running", table_name="retriever_jobs")
    op.drop_index("ix_retriever_jobs_state", table_name="retriever_jobs")
    op.drop_index("ix_retriever_jobs_tenant", table_name="retriever_jobs")
    op.drop_index("ix_retriever_jobs_collection", table_name="retriever_jobs")
    op.drop_table("retriever_jobs")
