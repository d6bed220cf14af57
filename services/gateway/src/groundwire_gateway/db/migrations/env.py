"""Alembic's entry point for the gateway's migrations (run by groundwire_core.database)."""

from groundwire_core.database import run_migrations_online
from groundwire_gateway.db import tables  # noqa: F401  (registers every table on Base)
from groundwire_gateway.db.base import Base

run_migrations_online(Base.metadata)
