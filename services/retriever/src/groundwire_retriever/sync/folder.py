"""The files of a folder source set: every file under the folder, or a git working
tree's tracked files, filtered by the definition's globs, size limit and formats.

Source ids are paths relative to the folder with ``/`` separators (as ``groundwire
ingest`` makes them), so a folder once ingested by hand syncs without re-embedding.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

from groundwire_core.errors import InvalidInput, Unavailable
from groundwire_core.outbound import strip_credentials
from groundwire_retriever.ingest.parsers import guess_format
from groundwire_retriever.ingest.pipeline import DocumentInput
from groundwire_retriever.sync.definition import Found, SourceKind, SyncDefinition

GIT_TIMEOUT_S = 60.0


class FolderSource:
    """Reads a folder source set; ``complete`` is always true (a listing is whole)."""

    complete = True

    def __init__(self, definition: SyncDefinition) -> None:
        self._definition = definition
        self._root = Path(definition.location)

    async def sources(self) -> AsyncIterator[Found]:
        """Every selected file, read, in path order. Raises Unavailable when git cannot
        list a working tree's files."""
        d = self._definition
        if d.kind is SourceKind.GIT:
            paths = await _git_files(self._root)
        else:
            paths = await asyncio.to_thread(_walk, self._root)
        for relative in sorted(paths):
            if not d.selects(relative):
                continue
            found = await asyncio.to_thread(self._read, relative)
            if found is not None:
                yield found

    def _read(self, relative: str) -> Found | None:
        """The file as a document, why it is skipped, or None for a file in a format
        the ingest does not read (left out unless an include glob asked for it)."""
        d = self._definition
        path = self._root / relative
        try:
            guess_format("", path.name)
        except InvalidInput as error:
            return Found(relative, reason=error.message, present=False) if d.include else None
        try:
            # a link may point anywhere on the machine: only files inside the folder go in
            if not path.resolve().is_relative_to(self._root.resolve()):
                return Found(relative, reason="a link to a file outside the folder", present=False)
            size = path.stat().st_size
            if size > d.max_bytes:
                return Found(
                    relative,
                    reason=f"the file is {size} bytes; the sync's limit is {d.max_bytes}",
                    present=False,
                )
            content = path.read_bytes()
        except FileNotFoundError:  # removed while the sync runs
            return Found(relative, reason="the file disappeared during the sync", present=False)
        except OSError as error:  # unreadable now: keep what is stored
            return Found(relative, reason=f"the file could not be read ({error.strerror})")
        site = strip_credentials(d.url_prefix).rstrip("/")  # a URL is shown: no password in it
        url = site + "/" + quote(relative, safe="/") if d.url_prefix else ""
        return Found(
            relative,
            DocumentInput(source_id=relative, content=content, filename=path.name, url=url),
        )


def _walk(root: Path) -> list[str]:
    """Relative paths of the regular files under ``root``; hidden files and folders
    (``.git``, ``.venv``) are left out and links to folders are not followed."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        base = Path(folder)
        for name in files:
            if not name.startswith(".") and (base / name).is_file():
                found.append((base / name).relative_to(root).as_posix())
    return found


async def _git_files(root: Path) -> list[str]:
    """The files git tracks in the working tree at ``root`` (``git ls-files``), those
    deleted from the tree but not yet from the index left out."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            str(root),
            "ls-files",
            "-z",
            "--cached",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise Unavailable(
            "git is not installed where the retriever runs", dependency="git"
        ) from None
    try:
        out, err = await asyncio.wait_for(process.communicate(), GIT_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise Unavailable(f"git ls-files took over {GIT_TIMEOUT_S:g} s", dependency="git") from None
    if process.returncode != 0:
        reason = err.decode(errors="replace").strip().splitlines()[-1:] or ["failed"]
        raise InvalidInput(f"{root} is not a git working tree ({reason[0]})")
    names = [n for n in out.decode(errors="surrogateescape").split("\0") if n]
    return [n for n in names if (root / n).is_file()]
