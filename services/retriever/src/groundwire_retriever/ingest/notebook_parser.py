"""Jupyter notebooks (``.ipynb``, nbformat 4) to Markdown: markdown cells as written,
code cells as fenced blocks in the kernel's language, outputs dropped.

Outputs are dropped because they are what the code printed (tracebacks, tables of
numbers, base64 images), often larger than the notebook's prose and rarely what a
question is about. A notebook is JSON with a small documented schema, so it is read
with the standard library's ``json`` rather than ``nbformat`` (BSD-3-Clause), which
would add ``jsonschema`` and its dependencies for validation we do ourselves on the
few fields we read. nbformat 3 notebooks (``worksheets``, before 2015) are refused
with the command that upgrades them.

Properties from the notebook's metadata: ``authors`` (names joined), ``title``,
``tags`` and the kernel's ``language``.
"""

from __future__ import annotations

import json
from typing import Any

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.markup import Extracted, MarkdownWriter


def _source(cell: dict[str, Any], index: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise InvalidInput(f"the notebook is not valid: cell {index}'s source is not text")


def _text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(" ".join(str(v).split()) for v in value if isinstance(v, str | int))
    return " ".join(str(value).split()) if isinstance(value, str | int | float) else ""


def _properties(meta: dict[str, Any], language: str) -> dict[str, str]:
    authors = meta.get("authors")
    names = []
    if isinstance(authors, list):
        for author in authors:
            name = author.get("name") if isinstance(author, dict) else author
            if isinstance(name, str) and name.strip():
                names.append(" ".join(name.split()))
    properties = {
        "author": ", ".join(names),
        "tags": _text(meta.get("tags", "")),
        "language": language,
    }
    return {key: value for key, value in properties.items() if value}


def _language(meta: dict[str, Any]) -> str:
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = meta.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return " ".join(section[field].split())[:40]
    return ""


def parse_notebook(content: bytes) -> Extracted:
    """A notebook as Markdown. Raises InvalidInput for content that is not a notebook
    (not UTF-8 JSON, no ``cells`` list, a cell without text source) or has no text."""
    try:
        notebook = json.loads(content.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise InvalidInput(f"the notebook is not valid UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise InvalidInput(
            f"the notebook is not valid JSON ({error.msg}, line {error.lineno})"
        ) from None
    except RecursionError:
        raise InvalidInput("the notebook nests too deeply to parse (RecursionError)") from None
    if not isinstance(notebook, dict):
        raise InvalidInput("the notebook is not valid: its JSON is not an object")
    if "worksheets" in notebook:
        raise InvalidInput(
            "the notebook is in nbformat 3; upgrade it with "
            "`jupyter nbconvert --to notebook --nbformat 4`"
        )
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise InvalidInput("the notebook is not valid: it has no list of cells")
    meta = notebook.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    language = _language(meta)
    out = MarkdownWriter()
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise InvalidInput(f"the notebook is not valid: cell {index} is not an object")
        kind = cell.get("cell_type")
        source = _source(cell, index)
        if kind == "markdown":
            out.markdown(source)  # the notebook's prose, headings included
        elif kind == "code":
            out.code(source, language)
        elif kind != "raw":  # raw cells are for nbconvert's output, not for readers
            raise InvalidInput(f"the notebook is not valid: cell {index} has type {kind!r}")
    if not out.has_text():
        raise InvalidInput("the notebook has no text")
    return Extracted(
        title=_text(meta.get("title", "")),
        markdown=out.text(),
        properties=_properties(meta, language),
    )
