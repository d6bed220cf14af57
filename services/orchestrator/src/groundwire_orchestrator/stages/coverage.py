"""Coverage: whether the collection covers the question at all, decided from
calibrated evidence before an answer is written.

Retrieval always returns *something* (BM25 matches any shared word), so without a
judge of relevance an off-topic question gets quoted back unrelated passages. This
stage weighs the evidence of the ranked candidates and declines when it is too weak:

- **cross-encoder** (the rerank stage scored the candidates): the best reranker score
  against ``rerank_threshold``. Not calibrated here: no cross-encoder weights can be
  had offline, so the default is the rerank stage's own score floor.
- **hybrid** (no reranker, or it fell back), from the top ``top_k`` candidates:
  1. *names*: a name the question uses (a word capitalised after the first, an
     acronym, a word with digits: "Helm", "GraphQL", "S3"; not general acronyms such
     as "API" or "HTTP") that none of the candidates contains declines at once. BM25
     would have found a passage naming it, so the collection does not: a question
     about another product or tool. A name of several words ("GNU Make", "Visual
     Studio") is one name: it counts as mentioned only where two of its words stand
     side by side; its words found apart ("gnu" in ``-std=gnu++11``, "make" anywhere)
     do not mention it. A tool named in lower case as the means a how-to question
     ends on ("How do I profile it with perf?") is a name too.
     A name the candidates do contain, but only *in passing*, declines as well: one
     that stands in no candidate's title, heading or file name, and whose passages
     are not where the question's task is: they hold under ``PASSING_SHARE`` of the
     question's other words that the best passage holds, or, named in at most
     ``PASSING_MAX_PASSAGES`` of them, fewer of those words than the best. A
     collection about a tool names it in its headings or beside the task; npm's
     documentation mentions Jest and ESLint, Valgrind's AddressSanitizer and the JVM,
     in a sentence or two about something else. Numbers ("after 30 days") are not names,
     and names the question gives as examples ("extensions such as gnu++17") are not
     its subject.
  2. *task* ``TASK_DENSE_WEIGHT * dense + (1 - weight) * together`` against
     ``TASK_THRESHOLD`` (while ``threshold`` is on): ``dense`` is the best dense cosine
     among the candidates (the retriever's raw dense-path score; 0 when none passed
     the dense floor), ``together`` the best share of the question's content words
     (stemmed, stop words out) found in *one* candidate (title and file name
     included). Words spread over unrelated passages are no evidence that any passage
     is about the question: "create a Python virtual environment" found every word
     somewhere in CMake's reference, never more than half of them together.

  The *evidence* ``dense_weight * dense + (1 - dense_weight) * terms`` (``terms``: the
  share of the question's content words found anywhere in the candidates) against
  ``threshold`` no longer declines: under it the collection covers the question
  *thinly* (``Coverage.thin``), which is answered from the collection and, with live
  documentation on, looked up on the collection's sites as well. On the labelled sets
  (evals/declines, 2 sets; evals/docs-answers, 11) it declined no out-of-scope question
  that another rule let through, and 7 answerable ones ("How do I call a function and
  see what it returned?" on the Lambda examples: the page says "invoke"; figures in
  ``benchmarks/README.md``). The best BM25 score is reported but not weighed: its
  scale depends on the collection.

A decline says what was looked for (the question's words) and which rule declined.

Weight and threshold were chosen on the labelled in-scope / out-of-scope sets in
``evals/declines/`` (samples/corpus and docs/, MiniLM, no LLM) with
``benchmarks/declines_bench.py --fit``; the figures are in ``benchmarks/README.md``
(decline precision and recall per set). They are model-dependent, like the citation
threshold.

The stage never raises and never drops candidates itself; the pipeline acts on its
verdict (an empty ledger becomes the normal decline). The stage report states the
evidence, the threshold and the verdict.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from groundwire_orchestrator.domain import Candidate, StageReport
from groundwire_orchestrator.text.sentences import STOPWORDS, chunk_body, content_words

Method = Literal["cross-encoder", "hybrid"]

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*[A-Za-z0-9]")
_IDENTIFIER_JOINS = re.compile(r"[_=./-]+")
_MEANS = re.compile(r"\b(?:with|using|via)\s+([a-z][a-z0-9+.-]*[a-z0-9+])\W*$")
"""A lower-case tool the question ends on as its means: "profile a program with perf?"."""
_HOW_TO = re.compile(r"^\W*how (?:do|can|should|would) (?:i|we|you|one)\b|^\W*how to\b",
                     re.IGNORECASE)
"""A question asking how to do something: its closing "with X" is the means, not company
("which wine goes with salmon")."""
_EXAMPLES = re.compile(
    r"\b(?:such as|e\.g\.|for example|for instance|like|in favou?r of|instead of|rather than|"
    r"other than)\b", re.IGNORECASE)
"""Where a question starts giving examples or contrasts: names after it are not its subject."""
PASSING_MAX_PASSAGES = 2
PASSING_SHARE = 0.5
"""A name in no title, heading or file name is mentioned in passing when the passages
naming it hold under PASSING_SHARE of the question's other words that the best
candidate holds, or fewer of them than the best while at most PASSING_MAX_PASSAGES
candidates name it. Set on the seen documentation sets (evals/docs-answers: npm,
Valgrind, AWS, CMake). A first version declined on the count alone: it caught more
(LLDB, apt) but declined "publish … through OpenID Connect" (npm, named once, in the
passage that answers) and "which command exports the MiniLM model" (samples/corpus,
two pages: tests/integration/golden); a name in the passage best holding the task is
not in passing. Judged on the Node.js set, built blind (evals/docs-answers/README.md)."""
TASK_DENSE_WEIGHT = 0.75
TASK_THRESHOLD = 0.353
"""Chosen on the in-scope and out-of-scope questions of evals/declines (samples/corpus,
docs/) and the tuning halves of evals/docs-answers (AWS CLI s3api examples, CMake's
command reference), MiniLM, no LLM, the way benchmarks/declines_bench.py fits: the
weight declining the most out-of-scope questions the other rules let through while the
lowest in-scope task evidence (0.403) stays MIN_MARGIN (0.05) above the threshold. It
declines two of them ("create a Python virtual environment" on CMake, "receive a
webhook when ingestion finishes" on samples/corpus) and none of the held-out halves:
paraphrased in-scope questions ("does a request still succeed when one part of the
pipeline is broken", 0.41 at weight 0.5) hold their words as far apart as off-topic
ones do (benchmarks/README.md, "Answers on documentation nobody here wrote")."""
GENERIC_ACRONYMS = frozenset(
    "ABI API APIS CLI CPU CSV DNS FAQ GPU GUI HTML HTTP HTTPS ID IDE IDS IP JSON OS PDF RAM "
    "REST SDK SQL SSL TLS UI URL URLS UTF XML YAML".split()
)
"""Acronyms of general vocabulary, not names: a collection about one product need not
spell out "API" to answer a question about its API. ABI, GUI and IDE were added after the
CMake target properties set (built blind) declined "the ABI version … soname" and "a
Windows GUI executable" for them."""


@dataclass(frozen=True)
class CoverageInput:
    query: str
    candidates: Sequence[Candidate]
    """Ranked, best first."""
    reranked: bool
    """Whether the candidates' scores are the cross-encoder's."""


@dataclass(frozen=True)
class Coverage:
    """The verdict and the evidence it rests on."""

    covered: bool
    method: Method
    evidence: float
    threshold: float
    dense: float = 0.0
    terms: float = 0.0
    unknown_names: tuple[str, ...] = ()
    """Names in the question that no candidate contains (hybrid only)."""
    together: float = 0.0
    """The best share of the question's content words found in one candidate (hybrid)."""
    looked_for: tuple[str, ...] = ()
    """The question's content words, as searched (what a decline says it looked for)."""
    task: float = 0.0
    """Task evidence: dense and ``together`` weighed (hybrid)."""
    task_threshold: float = 0.0
    """Task evidence under this declines (0 = off)."""
    passing_names: tuple[str, ...] = ()
    """Names the candidates mention only in passing (hybrid only)."""
    thin: bool = False
    """Covered, but the evidence is under ``threshold``: answered from the collection,
    and looked up live too when live documentation is on (hybrid only)."""

    def decline_reason(self) -> str:
        """What was looked for and why it counts as not covered, for the reader."""
        what = ", ".join(self.looked_for) or "the question"
        if self.unknown_names:
            return (
                f"looked for {what}; no passage mentions {', '.join(self.unknown_names)}"
            )
        if self.passing_names:
            return (
                f"looked for {what}; {', '.join(self.passing_names)} is mentioned only in "
                "passing (in no title or heading, and not with the rest of the question)"
            )
        if self.method == "cross-encoder" or self.task >= self.task_threshold:
            return (
                f"looked for {what}; no passage covers them closely enough "
                f"(evidence {self.evidence:.2f} < {self.threshold:g})"
            )
        return (
            f"looked for {what}; no one passage holds them together "
            f"(task evidence {self.task:.2f} < {self.task_threshold:g})"
        )


@dataclass(frozen=True)
class CoverageParams:
    threshold: float = 0.0
    """Hybrid evidence under this marks the question thinly covered (not a decline);
    0 = off, and the task rule with it."""
    rerank_threshold: float = 0.0
    """Best cross-encoder score under this declines; 0 = never decline."""
    dense_weight: float = 0.5
    top_k: int = 20
    names: bool = False
    """Decline when the question names something no candidate contains, or mentions
    only in passing."""
    with_llm: bool = False
    """Act on the verdict when an LLM writes the answer too (it can decline by itself,
    and its HyDE rewrite changes the dense evidence the threshold was chosen on)."""
    task_threshold: float = TASK_THRESHOLD
    """Task evidence (``task_dense_weight * dense + (1 - weight) * together``) under this
    declines, when ``threshold`` is on (above 0)."""
    task_dense_weight: float = TASK_DENSE_WEIGHT


def names_in(query: str) -> list[str]:
    """The words of ``query`` that read as names: capitalised (not a sentence's first
    word), all capitals, or holding a digit ("Helm", "SAML", "S3", "BGE-M3")."""
    names = []
    for match in _WORD.finditer(query):
        w = match.group(0)
        before = query[: match.start()].rstrip()
        opens_sentence = not before or before[-1] in ".!?:;\"'(\n"
        head, _, rest = w.partition("-")
        if w.upper() in GENERIC_ACRONYMS or (
            rest.islower() and head.upper() in GENERIC_ACRONYMS
        ):
            continue  # general vocabulary: "API", "CPU-heavy", "JSON-encoded"
        if (
            (w[0].isupper() and not opens_sentence)
            or (len(w) > 1 and w.isupper())
            or any(c.isdigit() for c in w)
        ):
            names.append(w)
    return names


def multiword_names(query: str) -> list[str]:
    """The runs of two or more names side by side in ``query`` (only spaces between),
    as written: "GNU Make", "Route 53", "GitHub Actions"."""
    names = set(names_in(query))
    runs: list[list[re.Match[str]]] = []
    for match in _WORD.finditer(query):
        if match.group(0) not in names:
            continue
        last = runs[-1][-1] if runs else None
        if last is not None and query[last.end() : match.start()].isspace():
            runs[-1].append(match)
        else:
            runs.append([match])
    return [query[r[0].start() : r[-1].end()] for r in runs if len(r) > 1]


def means_named(query: str) -> list[str]:
    """The lower-case tool a how-to ``query`` ends on as its means ("How do I … with
    perf?"): a name, though not capitalised. Stop words are not tools ("… with it?")."""
    if not _HOW_TO.match(query):
        return []
    m = _MEANS.search(query.strip())
    return [m.group(1)] if m and m.group(1) not in STOPWORDS else []


def _is_subject(query: str, name: str) -> bool:
    """Whether ``name`` is something ``query`` asks about: not a number, and not named
    after the question starts giving examples ("such as gnu++17", "instead of Make")."""
    cut = m.start() if (m := _EXAMPLES.search(query)) else len(query)
    return query.find(name) < cut and not name.replace(".", "").isdigit()


def subject_names(query: str) -> list[str]:
    """The names ``query`` asks about (``_is_subject``): its several-word names, then its
    single names and the means it ends on, each once."""
    phrases = multiword_names(query)
    inside = {w for p in phrases for w in _WORD.findall(p)}
    single = [n for n in names_in(query) + means_named(query) if n not in inside]
    return [n for n in dict.fromkeys(phrases + single) if _is_subject(query, n)]


def _occurs(phrase: Sequence[str], words: Sequence[str]) -> bool:
    """Whether ``phrase`` stands in ``words`` (its words side by side, in order)."""
    n = len(phrase)
    return n > 0 and any(list(words[i : i + n]) == list(phrase)
                         for i in range(len(words) - n + 1))


def _in_passing(
    phrase: Sequence[str], wanted: set[str], passages: Sequence[Sequence[str]],
    heads: Sequence[Sequence[str]],
) -> bool:
    """Whether ``passages`` mention ``phrase`` only in passing (see the module
    docstring); ``heads`` are their titles, headings and file names."""
    naming = [set(w) for w in passages if _occurs(phrase, w)]
    other = wanted - set(phrase)
    if not naming or not other or any(_occurs(phrase, h) for h in heads):
        return False  # a question that is only the name has no task to hold it to
    best = max(len(other & set(w)) for w in passages)
    held = max(len(other & w) for w in naming)
    return held < PASSING_SHARE * best or (len(naming) <= PASSING_MAX_PASSAGES and held < best)


def _side_by_side(phrase: Sequence[str], passages: Sequence[Sequence[str]]) -> bool:
    """Whether two consecutive words of ``phrase`` stand side by side in a passage."""
    pairs = set(pairwise(phrase))
    return any(pair in pairs for words in passages for pair in pairwise(words))


def searched_words(query: str) -> tuple[str, ...]:
    """The question's words that were looked for, as the reader wrote them (stop words
    out, each once)."""
    words = (w.strip(".-") for w in _WORD.findall(query))
    return tuple(dict.fromkeys(w for w in words if w and w.lower() not in STOPWORDS))


@dataclass(frozen=True)
class HybridEvidence:
    evidence: float
    dense: float
    terms: float
    unknown_names: tuple[str, ...]
    together: float = 0.0
    """The best share of the question's content words in one candidate: words spread
    over unrelated passages ("dynamodb" in an IAM policy, "capacity" in a quota page)
    are no evidence that any passage is about the question."""
    passing_names: tuple[str, ...] = ()
    """Names the candidates mention, but only in passing (see the module docstring)."""


def hybrid_evidence(
    query: str, candidates: Sequence[Candidate], *, dense_weight: float
) -> HybridEvidence:
    """The evidence of ``candidates`` for ``query`` (see the module docstring); all 0
    for no candidates."""
    if not candidates:
        return HybridEvidence(0.0, 0.0, 0.0, ())
    dense = max(0.0, max((c.path_score("dense") or 0.0 for c in candidates), default=0.0))
    found: set[str] = set()
    wanted = set(content_words(query))
    together = 0.0
    passages: list[list[str]] = []
    for c in candidates:
        sequence = content_words(f"{c.title} {_IDENTIFIER_JOINS.sub(' ', c.source_id)} "
                                 f"{chunk_body(c)}")
        passages.append(sequence)
        words = set(sequence)
        found.update(words)
        if wanted:
            together = max(together, len(wanted & words) / len(wanted))
    terms = len(wanted & found) / len(wanted) if wanted else 0.0
    # the names the question asks about (not "17" of "such as cxx_std_17"), read once: a
    # several-word name is absent unless two of its words stand side by side, a single
    # name unless all its words are found
    subjects = subject_names(query)
    phrases = set(multiword_names(query))
    unknown = tuple(
        n for n in subjects
        if (not _side_by_side(content_words(n), passages) if n in phrases
            else not set(content_words(n)) <= found)
    )
    named = [n for n in subjects if n not in unknown]
    # titles, headings and file names: only read when the question names something
    heads = [content_words(f"{c.title} {_IDENTIFIER_JOINS.sub(' ', c.source_id)} "
                           f"{' '.join(c.heading_path)}") for c in candidates] if named else []
    passing = tuple(
        n for n in named if _in_passing(content_words(n), wanted, passages, heads)
    )
    evidence = dense_weight * dense + (1.0 - dense_weight) * terms
    return HybridEvidence(evidence, dense, terms, unknown, together, passing)


class CoverageStage:
    def __init__(self, params: CoverageParams) -> None:
        self._params = params

    def acts(self, *, llm: bool) -> bool:
        """Whether the pipeline declines on this stage's verdict."""
        return self._params.with_llm or not llm

    async def run(self, inp: CoverageInput) -> tuple[Coverage, StageReport]:
        """The verdict on ``inp``; never raises. Async for the stages' common shape."""
        started = time.perf_counter()
        p = self._params
        top = inp.candidates[: p.top_k]
        details: dict[str, str] = {"candidates": str(len(top))}
        reason = "no candidates"
        if inp.reranked:
            best = max((c.score for c in top), default=0.0)
            verdict = Coverage(
                bool(top) and best >= p.rerank_threshold, "cross-encoder", best,
                p.rerank_threshold,
            )
            reason = f"cross-encoder score {best:.3f} < {p.rerank_threshold:g}"
        else:
            h = hybrid_evidence(inp.query, top, dense_weight=p.dense_weight)
            named_off = p.names and bool(h.unknown_names or h.passing_names)
            task = p.task_dense_weight * h.dense + (1.0 - p.task_dense_weight) * h.together
            task_off = p.threshold > 0 and task < p.task_threshold
            verdict = Coverage(
                bool(top) and not named_off and not task_off,
                "hybrid",
                h.evidence,
                p.threshold,
                h.dense,
                h.terms,
                h.unknown_names,
                h.together,
                searched_words(inp.query),
                task,
                p.task_threshold if p.threshold > 0 else 0.0,
                h.passing_names if p.names else (),
                p.threshold > 0 and h.evidence < p.threshold,
            )
            bm25 = [s for c in top if (s := c.path_score("bm25")) is not None]
            details.update(
                dense=f"{h.dense:.3f}",
                terms=f"{h.terms:.3f}",
                together=f"{h.together:.3f}",
                task=f"{task:.3f}",
                task_threshold=f"{verdict.task_threshold:g}",
                bm25=f"{max(bm25):.3f}" if bm25 else "none",
                dense_weight=f"{p.dense_weight:g}",
                unknown_names=", ".join(h.unknown_names),
                passing_names=", ".join(h.passing_names),
                thin="yes" if verdict.thin else "no",
            )
            reason = verdict.decline_reason()
        details.update(
            method=verdict.method,
            evidence=f"{verdict.evidence:.3f}",
            threshold=f"{verdict.threshold:g}",
            covered="yes" if verdict.covered else "no",
        )
        if not verdict.covered:
            details["declined"] = reason if top else "no candidates"
        ms = (time.perf_counter() - started) * 1e3
        return verdict, StageReport("coverage", ms, details=details)
