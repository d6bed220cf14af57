"""Front-matter curation: a document's own front matter can keep it out of a sync.

``draft: true`` or ``ingest: false`` in a Markdown file's front matter skips the file
(and deletes a stored copy of it): authors keep unfinished pages in the tree without
their text being answered from.
"""

from __future__ import annotations

import asyncio

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.parsers import guess_format, parse
from groundwire_retriever.ingest.pipeline import DocumentInput

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


async def curated_out(doc: DocumentInput) -> str:
    """Why the document's front matter keeps it out of the sync; "" when it does not
    (also for a document whose front matter cannot be read: ingesting it reports why)."""
    if not doc.content.startswith((b"---", b"\xef\xbb\xbf---")):
        return ""
    try:
        if guess_format(doc.format, doc.filename or doc.source_id) != "markdown":
            return ""
        # The same bounded front-matter reader the ingest uses (no anchors, capped size).
        parsed = await asyncio.to_thread(parse, doc.content, "markdown", filename=doc.filename)
    except InvalidInput:
        return ""
    meta = {k.lower(): v.strip().lower() for k, v in parsed.front_matter.items()}
    if meta.get("draft", "") in _TRUE:
        return "front matter says draft: true"
    if meta.get("ingest", "") in _FALSE:
        return "front matter says ingest: false"
    return ""
