"""The no-LLM answer: sentences taken from the top excerpts, each cited, labelled
extractive. (The full grounded-answer stage arrives with the chain work.)"""

from __future__ import annotations

import re
from collections.abc import Sequence

from groundwire_orchestrator.domain import Candidate

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _body(text: str) -> str:
    # chunks start with their heading path line; the answer quotes the body
    parts = text.split("\n\n", 1)
    return parts[1] if len(parts) == 2 else text


def extractive_answer(candidates: Sequence[Candidate], *, sentences: int = 3) -> str:
    """One leading sentence from each of the top ``sentences`` excerpts, cited [n]."""
    lines = []
    for number, cand in enumerate(candidates[:sentences], start=1):
        body = " ".join(_body(cand.text).split())
        first = _SENTENCE_END.split(body, maxsplit=1)[0] if body else ""
        if first:
            lines.append(f"{first} [{number}]")
    return " ".join(lines)
