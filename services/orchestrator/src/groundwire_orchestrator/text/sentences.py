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


# Words whose full stop is not a sentence's end ("Fig. 2", "et al. (2020)", "e.g. X"):
# splitting there cut claims such as "E. coli grows at 37 C" into fragments, and only
# the last fragment was checked. Lower-cased, without the final dot.
ABBREVIATIONS = frozenset(
    """al approx ca cf ch dept dr eq eqs etc fig figs incl mr mrs ms no nos pp prof ref
    refs resp sec sect st vol vs""".split()
)
# after these, an upper-case word does start a new sentence ("… Smith et al. The …")
_ENDING_ABBREVIATIONS = frozenset({"al", "etc"})
_DOTTED = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]$")
"""An initial ("E"), or letters joined by dots ("e.g", "U.S") before the final dot."""


def _is_abbreviation(line: str, match: re.Match[str]) -> bool:
    """Whether the boundary ``match`` in ``line`` is the dot of an abbreviation or an
    initial rather than a sentence's end (only a bare single dot can be one)."""
    if match.group() != ".":
        return False
    before = line[: match.start()]
    word = before[before.rfind(" ") + 1 :].lstrip("(\"'\u201c")
    if not word:
        return False
    rest = line[match.end() :].lstrip()
    upper_next = bool(rest) and rest[0].isupper()
    lowered = word.lower()
    if lowered in ABBREVIATIONS:
        return not (upper_next and lowered in _ENDING_ABBREVIATIONS)
    # an initial or a dotted abbreviation: one letter ("E"), or letters and dots ("e.g")
    return bool(_DOTTED.fullmatch(word)) and (len(word) == 1 or "." in word)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence of ``text`` (see :func:`split_sentences`), so
    ``text[start:end]`` is the sentence, stripped."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for raw_line in text.splitlines(keepends=True):
        line_start = offset
        offset += len(raw_line)
        line = raw_line.rstrip("\r\n")
        lead = len(line) - len(line.lstrip())
        if not line.strip():
            continue
        start = lead
        item = LIST_MARK.match(line[lead:])
        for match in _BOUNDARY.finditer(line, lead + item.end() if item else lead):
            if _is_abbreviation(line, match):
                continue
            _add_span(spans, line, line_start, start, match.end())
            start = match.end()
        _add_span(spans, line, line_start, start, len(line))
    return spans


def _add_span(
    spans: list[tuple[int, int]], line: str, line_start: int, start: int, end: int
) -> None:
    piece = line[start:end]
    stripped = piece.strip()
    if stripped:
        first = start + len(piece) - len(piece.lstrip())
        spans.append((line_start + first, line_start + first + len(stripped)))


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; a line break always ends one, and citation markers that
    follow a sentence's final punctuation ("… done. [2]") stay with that sentence. A
    list item's number ("3. …") belongs to its first sentence. The dot of an
    abbreviation or an initial ("E. coli", "e.g.", "Fig. 2", "et al.") ends none."""
    return [text[s:e] for s, e in sentence_spans(text)]


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
