"""The retriever's data path is private to its user: folders 0700, files 0600.

The data path holds every document's text, restricted ones included; it was 0755
with 0644 files, so any local user could read what the access lists hide (#31).
The service's process runs with umask 077 (``__main__``), so what the engine writes
later is private too; at start the existing tree is made so (a path written by an
older version, or by another process's umask).
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600
UMASK = 0o077


def keep_private(folder: Path) -> None:
    """Creates ``folder`` (0700) when missing and makes every folder under it 0700
    and every file 0600; links are left alone (their targets are not the data path's).
    Raises OSError when the folder cannot be created or changed (not its owner)."""
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    folder.chmod(PRIVATE_FOLDER)
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(PRIVATE_FOLDER)
        for name in files:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(PRIVATE_FILE)
