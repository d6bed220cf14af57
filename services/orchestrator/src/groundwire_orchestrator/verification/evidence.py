"""Where a claim's support sits in its passage: a sentence, located as [start, end) of
the passage text, for the citation's ``source_span`` (the page highlights it)."""

from __future__ import annotations

import re

from groundwire_orchestrator.text.sentences import content_words, overlap, sentence_spans

_SPACE = re.compile(r"\s+")


def locate(sentence: str, passage: str) -> tuple[int, int] | None:
    """[start, end) of ``sentence`` in ``passage``: an exact occurrence, else one that
    differs only in whitespace, else the passage sentence sharing most of its words
    (None when no passage sentence shares any)."""
    needle = sentence.strip()
    if not needle:
        return None
    at = passage.find(needle)
    if at >= 0:
        return at, at + len(needle)
    # whitespace runs may differ (a judge quotes a wrapped line on one line)
    words = needle.split()
    pattern = r"\s+".join(re.escape(w) for w in words)
    found = re.search(pattern, passage)
    if found:
        return found.start(), found.end()
    return best_sentence(needle, passage)


def best_sentence(claim: str, passage: str) -> tuple[int, int] | None:
    """The passage sentence sharing most of ``claim``'s content words (None when none
    shares any)."""
    wanted = content_words(claim)
    best: tuple[float, tuple[int, int]] | None = None
    for start, end in sentence_spans(passage):
        score = overlap(wanted, content_words(passage[start:end])) if wanted else 0.0
        if score > 0 and (best is None or score > best[0]):
            best = (score, (start, end))
    return best[1] if best else None


def flat(text: str) -> str:
    """``text`` with whitespace runs as one space (how sentences are compared)."""
    return _SPACE.sub(" ", text).strip()
