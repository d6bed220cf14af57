"""HTTP bodies of a sync (``POST /v1/admin/collections/{name}/sync``); declarations only.

The definition has the keys of ``groundwire sync``'s ``[sync.NAME]`` tables, so one
definition reads the same in the settings file, on the command line and over HTTP.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from groundwire_gateway.job_models import JobDeltaOut


def _whole(value: object) -> object:
    """JSON Schema's ``integer`` includes ``5.0`` (a number without a fraction), which
    strict pydantic refuses: such a float is taken as the integer it is; anything else
    (``5.5``, ``"5"``, ``true``) is left for strict validation to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[int, BeforeValidator(_whole)]
SyncOutcome = Literal["new", "changed", "renamed", "unchanged", "deleted", "skipped", "failed"]


class SyncBody(BaseModel):
    # strict as models.py's request bodies: `"dry_run": 0` or `"git": "yes"` is a 422,
    # not a guess (a write that was meant as a dry run must not happen)
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(
        min_length=1,
        max_length=2048,
        description="An absolute folder path the retriever can read (within its "
        "GROUNDWIRE_RETRIEVER_SYNC_ROOTS), or an http(s) start URL or sitemap URL (.xml).",
    )
    git: bool = Field(False, description="Folder: only the files git tracks.")
    include: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="fnmatch globs over the path relative to the folder or prefix ('*' "
        "also matches '/'); default: every file in a format the ingest reads.",
    )
    exclude: list[str] = Field(default_factory=list, max_length=100)
    max_bytes: WholeNumber = Field(
        0,
        ge=0,
        # 1 TiB: beyond any file worth reading, and within the RPC's uint64 (a larger
        # value failed in the conversion, a 500, instead of a 422)
        le=1 << 40,
        description="Skip larger files and pages; 0: 20 MiB.",
    )
    page_limit: WholeNumber = Field(0, ge=0, le=100_000, description="Web: pages at most; 0: 500.")
    delay_s: float | None = Field(
        None, ge=0, le=60, description="Web: seconds between requests; default 1."
    )
    prefix: str = Field(
        "", description="Web: the URL path to stay under; default the start URL's folder."
    )
    url_prefix: str = Field("", description="Folder: the site the files are published on.")
    dry_run: bool = Field(False, description="Answer with the delta; write nothing.")


class SyncSourceOut(BaseModel):
    source_id: str
    outcome: SyncOutcome = Field(
        description="skipped: left out of the source set (draft, size, robots.txt, gone); "
        "failed: not readable this time, its stored copy kept."
    )
    chunks: int
    reason: str = ""


class SyncReportOut(BaseModel):
    collection: str
    dry_run: bool
    complete: bool = Field(
        description="False when a crawl stopped at its page limit or met a transient "
        "error: stored pages it did not see were kept."
    )
    cancelled: bool
    chunks_written: int
    seconds: float
    delta: JobDeltaOut
    sources: list[SyncSourceOut]
