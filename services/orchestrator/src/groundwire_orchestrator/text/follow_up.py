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

Anything else is a new question and is searched unchanged. Missing a real follow-up
costs the answer, hence the generous rules.

A follow-up is resolved against the previous turn (its question, resolved the same
way, and the answer given to it), not glued to it: glued, "…and how do I delete that
user again?" after an access-key question was searched as both questions and found
``delete-access-key`` (issue #32). By what it refers to:

- a noun it points at ("that user", "these buckets"): the follow-up is searched on its
  own words, the pointer made "the", with the name the previous turn gave that noun
  (``--user-name Bob`` -> "Bob") when it gave one;
- a bare pronoun ("should it run", "pin them"): the pronoun is replaced by what the
  previous question asked about, the words after its verb ("How do I deploy Groundwire
  on Kubernetes?" -> "Groundwire on Kubernetes");
- otherwise (an ellipsis: "And across replicas?", "What about quotas?", or a previous
  question of no such shape): the previous question and the follow-up together, as
  before.

Connectives and fillers ("and", "again") are dropped from a resolved follow-up; the
analysis stage reports the question searched.
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
_CONNECTIVE = re.compile(
    r"^[\s.…]*(?:and|also|but|or|so|then|what about|how about|what if|same for)\b[\s,]*",
    re.IGNORECASE,
)
_FILLER = re.compile(r"[\s,]+(?:again|too|as well|then)(?=\s*[?.!]*\s*$)", re.IGNORECASE)
_NOT_NOUNS = (
    "is|are|was|were|be|been|do|does|did|has|have|had|will|would|can|could|should|may|"
    "might|must|work|works|mean|means|happen|happens|help|helps|change|changes|apply|"
    "applies|matter|matters|cost|costs|take|takes|one|ones|same|way|to|of|in|on|for|with|"
    "enough|ok|okay|right|true|correct|possible|safe|all|much|many|so|too|not|a|an|the"
)
_POINTED = re.compile(
    rf"\b(?:this|that|these|those)\s+(?P<noun>(?!(?:{_NOT_NOUNS})\b)[A-Za-z][\w-]*)",
    re.IGNORECASE,
)
_BARE = re.compile(r"\b(?:it|its|them|they|their)\b", re.IGNORECASE)
_ASK = re.compile(
    r"^(?:how\s+(?:do|can|should|would|could|does)\s+(?:i|we|you|one)|how\s+to|"
    r"can\s+(?:i|we|you)|what\s+do\s+(?:i|we)\s+need\s+to|is\s+there\s+a\s+way\s+to)"
    r"\s+(?P<verb>[\w-]+)\s+(?P<object>[^?.!]+)",
    re.IGNORECASE,
)


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
    """``question`` resolved against the previous turn when it is a follow-up (see the
    module docstring), else ``question`` unchanged."""
    previous = ""
    answer = ""
    for turn in history:
        if not turn.content.strip():
            continue
        text = " ".join(turn.content.split())
        if turn.role == "assistant":
            answer = text
            continue
        previous = resolve(text, previous, answer) if previous and is_follow_up(text) else text
        answer = ""
    if not previous or not is_follow_up(question):
        return question
    return resolve(question, previous, answer)


def resolve(follow_up: str, previous: str, answer: str = "") -> str:
    """The follow-up as a question of its own, given the previous (resolved) question
    and the answer to it: see the module docstring."""
    body = _FILLER.sub("", _CONNECTIVE.sub("", follow_up.strip())).strip()
    if not body:
        return _combine(previous, follow_up)
    if (pointed := _POINTED.search(body)) is not None:
        noun = pointed.group("noun")
        names = _names_of(noun, f"{previous} {answer}")
        text = body[: pointed.start()] + "the " + body[pointed.start("noun") :]
        return _with(text, names)
    topic = _topic(previous)
    if topic and (bare := _BARE.search(body)) is not None:
        possessive = bare.group(0).lower() in ("its", "their")
        topic_text = f"{topic}'s" if possessive else topic
        return body[: bare.start()] + topic_text + body[bare.end() :]
    return _combine(previous, follow_up)


def _with(text: str, names: Sequence[str]) -> str:
    """``text`` with ``names`` added before its final punctuation."""
    if not names:
        return text
    stripped = text.rstrip("?.! ")
    return f"{stripped} {' '.join(names)}{text[len(stripped):].strip()}"


def _names_of(noun: str, context: str) -> list[str]:
    """The names the context gives ``noun`` (``--user-name Bob``, ``bucket_name:
    my-bucket``), in order, at most two."""
    stem = re.escape(noun.rstrip("s"))
    pattern = re.compile(
        rf"\b{stem}s?[-_ ]?name[\"'`]?\s*[=: ]\s*[\"'`]?([\w.@/:-]+)", re.IGNORECASE
    )
    found = dict.fromkeys(m.group(1).rstrip(".,;:") for m in pattern.finditer(context))
    return [n for n in found if n][:2]


def _topic(question: str) -> str:
    """What ``question`` asks about: the words after its verb ("How do I deploy X on
    Y?" -> "X on Y"); "" for a question of another shape."""
    asked = _ASK.match(question.strip())
    if asked is None:
        return ""
    return asked.group("object").strip()


def _combine(previous: str, follow_up: str) -> str:
    return f"{previous[:MAX_CONTEXT_CHARS]} {follow_up}"
