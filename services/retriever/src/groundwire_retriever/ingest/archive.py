"""Zip containers (DOCX, PPTX, EPUB) opened only when they cannot unpack without bound.

A zip file states each member's unpacked size in its central directory, and
``zipfile`` never returns more than that size (a member that inflates further fails
its CRC check instead). So the stated sizes bound everything a parser can unpack,
and checking them before any member is read refuses a zip bomb (a few hundred KB
that inflate to gigabytes) in microseconds, with a reason, rather than after the
sandbox's memory budget is spent. The member count is bounded too: every member is
a directory entry the container libraries index up front.
"""

from __future__ import annotations

import io
import zipfile

from groundwire_core.errors import InvalidInput

# Office documents and e-books unpack to a few MiB (their XML compresses ~5-10x;
# images are stored compressed already); the sandbox's memory budget (1 GiB by
# default) must hold the unpacked parts and the libraries' trees of them.
MAX_UNPACKED_BYTES = 128 * 1024 * 1024
MAX_MEMBERS = 10_000


def open_zip(content: bytes, kind: str) -> zipfile.ZipFile:
    """The zip container of a ``kind`` document (for messages: "DOCX", "EPUB", ...).

    Raises InvalidInput when it is not a zip file, or when its members would unpack
    to more than MAX_UNPACKED_BYTES or number more than MAX_MEMBERS.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise InvalidInput(f"the {kind} file is not a valid zip container") from None
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise InvalidInput(
            f"the {kind} file holds {len(members)} parts; the limit is {MAX_MEMBERS}"
        )
    unpacked = sum(m.file_size for m in members)
    if unpacked > MAX_UNPACKED_BYTES:
        raise InvalidInput(
            f"the {kind} file would unpack to {unpacked >> 20} MiB (a zip bomb?); the "
            f"limit is {MAX_UNPACKED_BYTES >> 20} MiB"
        )
    return archive
