"""Prompt-injection screening of retrieved passages.

A passage that contains instructions aimed at a language model is flagged
(``Candidate.injection_flagged`` plus the names of the patterns it matched); the flag
reaches the response. Flagging changes nothing else: the passage stays data, inside
the excerpt delimiters (see text.prompting), and never alters the system prompt or
the tools. The screen is a documented heuristic, not a guarantee; the guarantee is
that retrieved text is never placed anywhere but inside those delimiters.

Normalisation before matching (so trivial obfuscation does not evade the patterns):
Unicode NFKC (full-width and styled letters become ASCII), invisible format
characters removed (zero-width spaces, joiners, BOM, bidi controls), common Cyrillic
and Greek look-alike letters mapped to Latin, lower case, letter-spaced words joined
("i g n o r e" -> "ignore"), whitespace collapsed. A second pass also undoes digit
"leetspeak" (1->i, 0->o, 3->e, 4->a, 5->s, 7->t, @->a, $->s).

Patterns (name: what it catches):

- ``override_instructions``: "ignore / disregard / forget / override … previous /
  prior / above / all / your / system … instructions / prompts / rules / context"
- ``new_instructions``: "new instructions:", "updated system prompt", "your new task is"
- ``role_reassignment``: "you are now …", "from now on you …", "pretend to be / you
  are", "role-play as", "act as an (unrestricted) AI / assistant / model"
- ``prompt_exfiltration``: "reveal / print / show / repeat / leak … system prompt /
  instructions / hidden prompt"
- ``chat_role_marker``: a line starting "system:" or "assistant:", or "### system" /
  "### instruction" headers
- ``template_tokens``: chat-template control tokens (<|im_start|>, [INST], <<SYS>>,
  <|eot_id|>, <system>) and our own excerpt delimiters (<excerpt>, </excerpts>)
- ``tool_call_bait``: "call / invoke / use the search / read_document / browser … tool
  or function", tool-call markup (<tool_call>, "tool_use", "function_call")
- ``concealment``: "do not tell / inform the user", "without telling the user"
- ``addressed_to_ai``: "note to the AI / assistant / LLM", "if you are an AI / language
  model", "AI models reading this"
- ``jailbreak``: "jailbreak", "DAN mode", "do anything now", "developer mode enabled"
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
import unicodedata
from collections.abc import Sequence

from groundwire_orchestrator.domain import Candidate, StageReport

# Cyrillic and Greek letters that look like Latin ones (written escaped: they are
# indistinguishable from Latin in an editor)
_CONFUSABLES = str.maketrans(
    "\u0430\u0432\u0435\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445\u0456\u0458"
    "\u0455\u0501\u0261\u0578\u03b1\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7",
    "abekmhopctyxijsdgnaeikvoptux",
)
_LEET = str.maketrans({"1": "i", "0": "o", "3": "e", "4": "a", "5": "s", "7": "t",
                       "@": "a", "$": "s"})
_MIXED = re.compile(r"[a-z][0-9@$]|[0-9@$][a-z]")
_SPACED = re.compile(r"\b(?:[a-z] ){2,}[a-z]\b")
# Unicode "format" characters (category Cf) that hide inside words: soft hyphen, Arabic
# letter mark, zero-width space/joiners, bidi marks and isolates, word joiner and
# invisible operators, BOM, interlinear annotation marks, tag characters.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f]"
)

_Q = r"(?:previous|prior|preceding|above|earlier|all|any|your|the system|system|original|" \
     r"initial|existing|developer|every)"
PATTERNS: dict[str, re.Pattern[str]] = {
    "override_instructions": re.compile(
        rf"\b(?:ignore|disregard|forget|override|bypass|abandon|drop)\b(?:\s+\w+){{0,2}}?\s+"
        rf"{_Q}\b(?:\s+\w+){{0,2}}?\s+(?:instructions?|prompts?|rules|directives|directions|"
        r"guidelines|context|messages|constraints)\b"
    ),
    "new_instructions": re.compile(
        r"\bnew (?:system )?instructions?\s*:|\b(?:updated|new|real) system prompt\b|"
        r"\byour (?:new|real|actual) (?:task|instructions?|goal|objective|role|persona) "
        r"(?:is|are)\b"
    ),
    "role_reassignment": re.compile(
        r"\byou are now\b|\bfrom now on,? you\b|\bpretend (?:to be|you are|that you)\b|"
        r"\brole-?play(?:ing)? as\b|\b(?:you (?:must|should|will|shall) )?act as (?:an? |the )?"
        r"(?:unrestricted |unfiltered |jailbroken |different |new )?"
        r"(?:ai|assistant|chatbot|model|llm|language model|dan)\b"
    ),
    "prompt_exfiltration": re.compile(
        r"\b(?:reveal|print|show|repeat|output|leak|disclose|display|tell me|give me|dump)\b"
        r"(?:\s+\S+){0,4}?\s+(?:system prompt|system message|initial prompt|hidden prompt|"
        r"hidden instructions|(?:your|the) (?:instructions|prompt|rules))\b"
    ),
    "chat_role_marker": re.compile(
        r"(?m)^\s*(?:system|assistant)\s*:|#{2,}\s*(?:system|instructions?)\b"
    ),
    "template_tokens": re.compile(
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\|>|"
        r"\[/?inst\]|<</?sys>>|</?system>|</?excerpts?\b"
    ),
    "tool_call_bait": re.compile(
        r"\b(?:call|invoke|use|run|trigger)\s+(?:the\s+|your\s+)?"
        r"(?:search|read_document|browser|web_search|code_interpreter|python|shell)\s+"
        r"(?:tool|function)\b|</?tool_(?:call|use|result)\b|\"(?:tool_use|function_call|"
        r"tool_calls)\""
    ),
    "concealment": re.compile(
        r"\b(?:do not|don't|never)\s+(?:tell|inform|mention (?:this )?to|reveal (?:this )?to|"
        r"alert|warn)\s+the user\b|\bwithout (?:telling|informing|alerting) the user\b"
    ),
    "addressed_to_ai": re.compile(
        r"\b(?:note|message|instructions?|attention)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
        r"(?:ai|assistant|llm|language model|chatbot|model)s?\b|\bif you are an? "
        r"(?:ai|llm|language model|assistant|chatbot)\b|\b(?:ai|llm)s? (?:models? |assistants? )?"
        r"(?:reading|processing|summari[sz]ing) this\b"
    ),
    "jailbreak": re.compile(
        r"\bjailbreak|\bdan mode\b|\bdo anything now\b|\bdeveloper mode (?:enabled|on)\b"
    ),
}


def normalise(text: str) -> str:
    """The text as the patterns see it (see the module docstring)."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    text = text.lower().translate(_CONFUSABLES)
    text = _SPACED.sub(lambda m: m.group(0).replace(" ", ""), text)
    return re.sub(r"[ \t\r\f\v]+", " ", text)


@functools.lru_cache(maxsize=4096)
def screen(text: str) -> tuple[str, ...]:
    """Names of the injection patterns ``text`` matches, in pattern order (cached: the
    same chunks come back request after request)."""
    plain = normalise(text)
    # the leetspeak pass only when a word mixes letters with digit look-alikes
    variants = (plain, plain.translate(_LEET)) if _MIXED.search(plain) else (plain,)
    return tuple(name for name, rx in PATTERNS.items() if any(rx.search(v) for v in variants))


def flag(cand: Candidate) -> Candidate:
    """``cand`` with its screening result."""
    found = screen(cand.text)
    if not found:
        return cand
    return dataclasses.replace(cand, injection_flagged=True, injection_patterns=found)


class ScreeningStage:
    """Flags passages with instructions aimed at the model; never drops or edits them."""

    async def run(self, candidates: Sequence[Candidate]) -> tuple[list[Candidate], StageReport]:
        """The candidates, each with its screening result; never raises. Async only for
        the stages' common shape: the screen is a few regular expressions per passage."""
        started = time.perf_counter()
        screened = [flag(c) for c in candidates]
        flagged = [c for c in screened if c.injection_flagged]
        details = {"screened": str(len(screened)), "flagged": str(len(flagged))}
        if flagged:
            names = sorted({p for c in flagged for p in c.injection_patterns})
            details["patterns"] = ", ".join(names)
            details["flagged_sources"] = ", ".join(sorted({c.source_id for c in flagged}))
        ms = (time.perf_counter() - started) * 1e3
        return screened, StageReport("screening", ms, details=details)
