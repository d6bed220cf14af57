"""The question a follow-up stands for when no language model can rewrite it.

A follow-up ("And across several gateway replicas?", "and pin it to a tag?") only
makes sense with the question before it; searched as it stands it finds passages about
replicas or tags in general. With an LLM, query analysis writes the self-contained
question. Without one (or when it fails), this heuristic decides whether the last user
message is a follow-up and, if so, searches it together with the previous user
question (itself resolved the same way, so a chain of follow-ups keeps its topic).

A message is a follow-up, given an earlier user question, when it

- starts with a connective that continues the previous question ("and", "also",
  "but", "or", "so", "then", "what about", "how about", "what if", "same for"), or
- has at most three words ("Why?", "For Kubernetes?"), or
- has at most ten words and a word that points back ("it", "its", "they", "them",
  "their", "this", "that", "these", "those", "there", "one", "ones", "same").

Anything else is a new question and is searched unchanged. Combining a message that
needed no context costs little (the previous question's words rank a little higher);
missing a real follow-up costs the answer, hence the generous rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from groundwire_orchestrator.domain import Turn

CONNECTIVES = (
    "and",
    "also",
    "but",
    "or",
    "so",
    "then",
    "what about",
    "how about",
    "what if",
    "same for",
)
POINTERS = frozenset(
    "it its it's they them their this that these those there one ones same".split()
)
SHORT_WORDS = 3
POINTER_WORDS = 10
MAX_CONTEXT_CHARS = 600
"""The previous question is cut to this many characters: a long earlier message should
not drown the follow-up's own words in the lexical query."""

_WORD = re.compile(r"[\w']+")


def is_follow_up(message: str) -> bool:
    """Whether ``message`` reads as a continuation of an earlier question."""
    words = [w.lower() for w in _WORD.findall(message)]
    if not words:
        return False
    text = " ".join(words)
    if any(text == c or text.startswith(c + " ") for c in CONNECTIVES):
        return True
    if len(words) <= SHORT_WORDS:
        return True
    return len(words) <= POINTER_WORDS and any(w in POINTERS for w in words)


def standalone_question(question: str, history: Sequence[Turn]) -> str:
    """``question`` combined with the previous user question when it is a follow-up
    (see the module docstring), else ``question`` unchanged."""
    previous = ""
    for turn in history:
        if turn.role != "user" or not turn.content.strip():
            continue
        text = " ".join(turn.content.split())
        previous = _combine(previous, text) if previous and is_follow_up(text) else text
    if not previous or not is_follow_up(question):
        return question
    return _combine(previous, question)


def _combine(previous: str, follow_up: str) -> str:
    return f"{previous[:MAX_CONTEXT_CHARS]} {follow_up}"
