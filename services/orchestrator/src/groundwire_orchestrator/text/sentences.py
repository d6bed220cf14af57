"""Plain-text tools the stages share: sentences, citation markers, content words
(Snowball-stemmed), approximate token counts and how a chunk is labelled."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable

import snowballstemmer

from groundwire_orchestrator.domain import Candidate

MARKER = re.compile(r"\[\s*(\d{1,4}(?:\s*,\s*\d{1,4})*)\s*\]")
"""A citation marker: [3], [1, 2] (adjacent ones, [1][2], match one by one)."""

_BOUNDARY = re.compile(
    r"[.!?]+[\"'\u2019\u201d)]*(?:\s*\[\s*\d{1,4}(?:\s*,\s*\d{1,4})*\s*\])*(?=\s|$)"
)
LIST_MARK = re.compile(r"^(?:[-*+•]|\d{1,3}[.)])\s+")
"""A list item's bullet or number, with the space after it."""
# emphasis marks and code ticks, but not the underscores inside LOG_JSON or snake_case
_EMPHASIS = re.compile(r"`+|(?<!\w)[*_]{1,3}|[*_]{1,3}(?!\w)")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself s t don't can't
    won't isn't aren't doesn't didn't it's that's there's""".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; a line break always ends one, and citation markers that
    follow a sentence's final punctuation ("… done. [2]") stay with that sentence. A
    list item's number ("3. …") belongs to its first sentence."""
    sentences: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        start = 0
        item = LIST_MARK.match(line)
        for match in _BOUNDARY.finditer(line, item.end() if item else 0):
            piece = line[start : match.end()].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def prose_sentences(text: str) -> list[str]:
    """Sentences of Markdown prose, cleaned (see :func:`strip_markers`): lines wrapped
    inside a paragraph are joined, each list item starts a sentence, and code blocks,
    headings, tables and block quotes are left out."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            lines.append("")
            continue
        if fenced or not stripped or stripped.startswith(("#", "|", ">")):
            lines.append("")
            continue
        if LIST_MARK.match(stripped):
            lines.append("")
            stripped = LIST_MARK.sub("", stripped)
        lines.append(stripped)
    paragraphs = "\n".join(" ".join(p.split("\n")) for p in "\n".join(lines).split("\n\n"))
    out = [strip_markers(s) for s in split_sentences(paragraphs)]
    return [s for s in out if s]


def marker_numbers(text: str) -> list[int]:
    """Every number cited in ``text``, in order of appearance (repeats kept)."""
    return [int(n) for m in MARKER.finditer(text) for n in m.group(1).split(",")]


def strip_markers(text: str) -> str:
    """``text`` without citation markers or list/emphasis markup, whitespace collapsed."""
    text = MARKER.sub("", text)
    text = LIST_MARK.sub("", text.strip())
    text = _EMPHASIS.sub("", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return " ".join(text.split())


_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    # Snowball's English (Porter 2) stemmer: "limits"/"limit", "reranked"/"rerank".
    # Cached: the same chunk words come back request after request, and the stemmer
    # is pure Python.
    return str(_STEMMER.stemWord(word))


def content_words(text: str) -> list[str]:
    """Lower-cased, stemmed words of ``text`` without stop words."""
    words = (w.lower().replace("\u2019", "'") for w in _WORD.findall(text))
    return [_stem(w) for w in words if w not in STOPWORDS]


def overlap(needle: Iterable[str], haystack: Iterable[str]) -> float:
    """Fraction of the distinct ``needle`` words found in ``haystack`` (1.0 when empty)."""
    wanted = set(needle)
    if not wanted:
        return 1.0
    return len(wanted & set(haystack)) / len(wanted)


def approx_tokens(text: str) -> int:
    """An approximate token count: about four characters per token, one per CJK
    character. Good to ±20%, which is all a context budget needs; the exact count
    depends on the LLM's tokenizer, which we do not have."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def truncate_tokens(text: str, tokens: int) -> str:
    """``text`` cut to about ``tokens`` tokens, at a word boundary, marked with "…"."""
    if approx_tokens(text) <= tokens:
        return text
    cut = text[: max(tokens, 0) * 4]
    space = cut.rfind(" ")
    if space > len(cut) // 2:
        cut = cut[:space]
    return cut.rstrip() + " …"


def heading_label(cand: Candidate) -> str:
    """"Title > heading path" of a chunk (the path already starts at the title when the
    document has one)."""
    path = cand.heading_path
    if cand.title and (not path or path[0] != cand.title):
        path = (cand.title, *path)
    return " > ".join(p for p in path if p)


def chunk_body(cand: Candidate) -> str:
    """The chunk text without the heading-path line the chunker puts first."""
    head, sep, body = cand.text.partition("\n\n")
    if sep and cand.heading_path and head.strip() == " > ".join(cand.heading_path):
        return body
    return cand.text
