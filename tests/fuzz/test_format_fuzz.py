"""Fuzzing issue #22's parsers: reStructuredText from runs of its markup, notebooks
from arbitrary JSON in a notebook's shape, and DOCX, PPTX and EPUB files (from
tests/fixtures/documents.py) with bytes flipped, inserted, deleted and cut off. Each
input must end as a result or an InvalidInput with a reason, never another exception.

Timing: the notebook and container parsers are held to the same linear limit as the
other parsers. docutils is not: its inline-markup parser is super-linear on
unbalanced markup (10,000 characters of ``*a `` in one paragraph took 13 s; see
``rst_parser``), which the sandbox's time budget bounds in the service, so the
reStructuredText inputs here stay under ~1,500 characters and get a flat limit.
"""

from __future__ import annotations

import io
import json
import zipfile

from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures import documents
from tests.fuzz.conftest import FuzzTally
from tests.fuzz.test_document_fuzz import (
    _MUTATION,
    _limit,
    _mutate,
    _outcome,
    _parse_and_chunk,
    fuzz_settings,
    runs,
)

RST_ATOMS = [
    "\n",
    " ",
    "   ",
    "=",
    "-",
    "~",
    "*",
    "**",
    "`",
    "``",
    "_",
    ":",
    "..",
    ".. ",
    ":: ",
    "|",
    "+--",
    "- ",
    "#. ",
    "word ",
    "Title\n=====\n",
    ":Author: x\n",
    ".. code-block:: python\n\n   ",
    ".. include:: x\n",
]
RST_LIMIT_S = 20.0  # generous: see test_document_fuzz's FLOOR_S

_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40))
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
_CELL = st.fixed_dictionaries(
    {},
    optional={
        "cell_type": st.one_of(st.sampled_from(["markdown", "code", "raw"]), _SCALAR),
        "source": st.one_of(st.text(max_size=200), st.lists(st.text(max_size=40)), _JSON),
        "outputs": _JSON,
    },
)
_NOTEBOOK = st.fixed_dictionaries(
    {},
    optional={
        "cells": st.one_of(st.lists(st.one_of(_CELL, _JSON), max_size=6), _JSON),
        "metadata": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "kernelspec": _JSON,
                    "language_info": _JSON,
                    "authors": _JSON,
                    "tags": _JSON,
                    "title": _JSON,
                },
            ),
            _JSON,
        ),
        "worksheets": _JSON,
    },
)


@fuzz_settings(examples=600)
@given(text=runs(RST_ATOMS, 60, max_parts=12).map(lambda t: t[:1_500]))
def test_rst(text: str, fuzz_tally: FuzzTally) -> None:
    content = text.encode("utf-8", "surrogatepass")
    with fuzz_tally.timed("rst", RST_LIMIT_S):
        _outcome(lambda: _parse_and_chunk(content, "rst"))


@fuzz_settings(examples=600)
@given(notebook=_NOTEBOOK)
def test_notebook(notebook: dict[str, object], fuzz_tally: FuzzTally) -> None:
    content = json.dumps(notebook).encode()
    with fuzz_tally.timed("notebook", _limit(len(content))):
        _outcome(lambda: _parse_and_chunk(content, "notebook"))


def _stable(content: bytes) -> bytes:
    """The same zip with fixed member timestamps (python-docx and python-pptx write
    the time of saving), so the derandomized inputs are the same every run."""
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        return documents.zip_bytes((m.filename, archive.read(m)) for m in archive.infolist())


def _containers() -> dict[str, bytes]:
    return {
        "docx": _stable(documents.docx_document()),
        "pptx": _stable(documents.pptx_deck()),
        "epub": documents.epub_book(),
    }


_BASES = _containers()


@fuzz_settings(examples=900)
@given(
    fmt=st.sampled_from(sorted(_BASES)),
    mutations=st.lists(_MUTATION, min_size=1, max_size=4),
)
def test_zip_containers(
    fmt: str, mutations: list[tuple[str, float, bytes, int]], fuzz_tally: FuzzTally
) -> None:
    content = _mutate(_BASES[fmt], mutations)
    with fuzz_tally.timed(fmt, _limit(len(content)) + 1.0):
        _outcome(lambda: _parse_and_chunk(content, fmt))
