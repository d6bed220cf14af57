"""The gateway's tables in the system of record: their declarative base and migrations.

Only this package speaks SQL (one repository module per family of tables); the rest of
the gateway sees typed records. No other service reads these tables.
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from groundwire_core.database import Migrations


class Base(DeclarativeBase):
    """The gateway's own MetaData: its tables and nothing else."""


MIGRATIONS = Migrations(
    script_location="groundwire_gateway.db:migrations",
    version_table="alembic_version_gateway",
)
