"""A sync's source definition and what one source of it turned out to be.

A definition names one source set: a folder the retriever reads (optionally a git
working tree, whose tracked files are the set), or a website crawled from a start
page or a sitemap. Nothing here reads or fetches; ``folder`` and ``crawler`` do.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from groundwire_core.errors import InvalidInput
from groundwire_core.urls import is_web_url
from groundwire_retriever.ingest.pipeline import DocumentInput

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_PAGE_LIMIT = 500
DEFAULT_DELAY_S = 1.0
MAX_PAGE_LIMIT = 100_000
MAX_DELAY_S = 60.0


class SourceKind(enum.Enum):
    """Where a source set lives."""

    FOLDER = "folder"
    """Every file under a folder (hidden files and folders left out)."""
    GIT = "git"
    """The files a git working tree tracks (``git ls-files``)."""
    WEB = "web"
    """Pages crawled from a start URL, or listed by a sitemap (a URL ending in .xml)."""


@dataclass(frozen=True)
class SyncDefinition:
    """One collection's source set. Globs are ``fnmatch`` patterns over a file's path
    relative to the folder, or a page's URL path relative to the crawl's prefix (``*``
    also matches ``/``); with no include pattern every file in a known format is in."""

    kind: SourceKind
    location: str
    """The folder (absolute, on the retriever's machine) or the start/sitemap URL."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES
    """Files and pages larger than this are skipped (never read whole)."""
    page_limit: int = DEFAULT_PAGE_LIMIT
    """Web: at most this many pages are fetched; a crawl cut short deletes nothing
    it did not see gone."""
    delay_s: float = DEFAULT_DELAY_S
    """Web: seconds between two requests (robots.txt's Crawl-delay when longer)."""
    prefix: str = ""
    """Web: the URL path the crawl stays under; default the start URL's folder."""
    url_prefix: str = ""
    """Folder: the site the files are published on; a source's URL is this plus its
    path (as ``groundwire ingest --url-prefix``)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values (a job keeps its definition across restarts)."""
        return {**asdict(self), "kind": self.kind.value}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SyncDefinition:
        """The definition ``as_dict`` wrote. Raises InvalidInput for an unknown kind or key."""
        try:
            kind = SourceKind(values["kind"])
            rest = {k: v for k, v in values.items() if k != "kind"}
            for key in ("include", "exclude"):
                if key in rest:
                    rest[key] = tuple(rest[key])
            return cls(kind=kind, **rest)
        except (KeyError, ValueError, TypeError) as error:
            raise InvalidInput(f"not a sync definition ({error})") from None

    def selects(self, relative: str) -> bool:
        """Whether the include/exclude globs keep ``relative``."""
        if self.include and not any(fnmatch.fnmatchcase(relative, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(relative, g) for g in self.exclude)


def check_definition(
    definition: SyncDefinition,
    folder_roots: Sequence[Path] = (),
    *,
    max_bytes_limit: int = DEFAULT_MAX_BYTES,
) -> None:
    """Raises InvalidInput for a definition that cannot run: a relative or missing
    folder, a folder outside ``folder_roots`` (when any are given), a URL that is not
    absolute http(s), or a limit out of range (``max_bytes`` above the retriever's
    ``max_bytes_limit``: the default follows the limit, see ``within_limit``)."""
    d = definition
    if d.max_bytes < 1:
        raise InvalidInput("max_bytes must be at least 1")
    if d.max_bytes > max_bytes_limit and d.max_bytes != DEFAULT_MAX_BYTES:
        raise InvalidInput(
            f"max_bytes must be at most {max_bytes_limit} (the retriever's largest document)"
        )
    if not 1 <= d.page_limit <= MAX_PAGE_LIMIT:
        raise InvalidInput(f"page_limit must be between 1 and {MAX_PAGE_LIMIT}")
    if not 0 <= d.delay_s <= MAX_DELAY_S:
        raise InvalidInput(f"delay_s must be between 0 and {MAX_DELAY_S:g}")
    if d.kind is SourceKind.WEB:
        if not is_web_url(d.location) or not urlsplit(d.location).hostname:
            raise InvalidInput(f"{d.location!r} is not an absolute http(s) URL")
        if d.prefix and not d.prefix.startswith("/"):
            raise InvalidInput("prefix must be a URL path starting with '/'")
        return
    if d.url_prefix and not is_web_url(d.url_prefix):
        raise InvalidInput("url_prefix must be an absolute http(s) URL")
    folder = Path(d.location)
    if not folder.is_absolute():
        raise InvalidInput(f"the folder {d.location!r} must be an absolute path")
    if not folder.is_dir():
        raise InvalidInput(f"the retriever sees no folder at {d.location!r}")
    if folder_roots:
        resolved = folder.resolve()
        if not any(resolved.is_relative_to(Path(r).resolve()) for r in folder_roots):
            allowed = ", ".join(str(r) for r in folder_roots)
            raise InvalidInput(f"the folder {d.location!r} is outside the sync roots ({allowed})")


def within_limit(definition: SyncDefinition, max_bytes_limit: int) -> SyncDefinition:
    """The definition with ``max_bytes`` at most the retriever's limit (a definition
    that kept the default where the operator lowered the limit follows the limit)."""
    if definition.max_bytes <= max_bytes_limit:
        return definition
    return replace(definition, max_bytes=max_bytes_limit)


@dataclass(frozen=True)
class Found:
    """One source a collector met: a document to compare, or why it is not one.

    ``present`` says whether the id is still part of the source set: a source that
    could not be read this time (a network error, a parse failure) is kept as
    stored, while one that is gone (404) or curated out (draft) is deleted."""

    source_id: str
    document: DocumentInput | None = None
    reason: str = ""
    present: bool = True
