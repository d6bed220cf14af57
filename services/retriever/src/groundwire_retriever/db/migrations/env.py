"""Alembic's entry point for the retriever's migrations (run by groundwire_core.database)."""

from groundwire_core.database import run_migrations_online
from groundwire_retriever.db import tables  # noqa: F401  (registers every table on Base)
from groundwire_retriever.db.base import Base

run_migrations_online(Base.metadata)
