"""The retriever's tables in the system of record: their declarative base and migrations.

Only this package speaks SQL (one repository module per family of tables); the rest of
the retriever sees typed records. No other service reads these tables.
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from groundwire_core.database import Migrations


class Base(DeclarativeBase):
    """The retriever's own MetaData: its tables and nothing else."""


MIGRATIONS = Migrations(
    script_location="groundwire_retriever.db:migrations",
    version_table="alembic_version_retriever",
)
