"""A throw-away system of record for a gateway started without a database URL."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from groundwire_core.database import sqlite_url


class ScratchDatabase:
    """A throw-away SQLite file for a gateway without a database URL (tests, a quick
    try): its rows are gone when the gateway stops, like an in-memory database, but
    each unit of work has its own connection (an in-memory database is one connection
    shared by every session: their transactions would interleave)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="groundwire-gateway-"))
        self.url = sqlite_url(self.folder / "gateway.sqlite3")
        atexit.register(self.remove)  # also when the app never started or stopped

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
