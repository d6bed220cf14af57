"""The extractive answer, used when no LLM is configured (or the LLM failed): the
blocks of the top excerpts that best answer the question, quoted verbatim and whole,
each under the line naming where it is ("*Title > Section*:"), with its [n] citations,
and labelled extractive (mode and stage report).

A block (text.blocks) is what documentation answers with: an example (the sentence
that introduces a command and the command's code block), a paragraph, a list, a table
(a row of a long one, under its header row), a code block; a block longer than
MAX_BLOCK_CHARS is quoted by its parts. Quoting single sentences picked the sentence
before the one naming the function, or an error message rather than the option on the
same page (issue #32: on the AWS CLI's and CMake's reference pages, see
evals/docs-answers/). A sentence that only points elsewhere ("See Git Authentication.")
answers nothing and is left out of its block.

Blocks are scored against the query by the cross-encoder when one is configured and
answers; otherwise by ``SEMANTIC_WEIGHT`` x the embedder's cosine (query vs the block's
plain text under its heading) + ``LEXICAL_WEIGHT`` x the share of the query's content
words in the block + ``TASK_WEIGHT`` x their share in what the block says it is about
(the page title, the heading above it, its lead-in); with the embedder down, the word
share alone. They are then chosen by maximal marginal relevance (MMR): each pick is the
block with the best ``MMR_LAMBDA * relevance - (1 - MMR_LAMBDA) * similarity to the
blocks already chosen`` (embedder cosine, else word overlap), so the answer does not
say one thing twice; a block nearly identical to a chosen one (similarity at least
``DUPLICATE_SIMILARITY``, or the same words) is never quoted. At most ``max_blocks``
blocks, ``per_source`` from one excerpt, MAX_ANSWER_CHARS in all after the first, the
best block's excerpt first (then each excerpt by its best block, an excerpt's blocks in
its own order). A how-to question ("how do I", "which command") adds PROCEDURE_BONUS
to blocks holding code: code shares few words with a question, yet is what such a
question asks for; not to code introduced as output ("Output:", "Example output"),
which shows what a command prints, not what to run (the AWS CLI's examples follow
each command with its output: "How do I stop a key's pending deletion?" quoted
cancel-key-deletion's JSON, not the command). Such an answer also states the command
its best block's page documents: the page's synopsis (a code block under a Synopsis,
Usage, Syntax or Signature heading, else the command line there: man pages written in
Markdown set it in bold), from the excerpts or, when none holds it, read from the collection
through ``read_synopsis`` (a page cut at its headings leaves it a chunk of its own that
shares few words with any question). On npm's documentation (evals/docs-answers) the
answers named the page and quoted "this command will print..." without the command.

A block scoring under ``RELATIVE_FLOOR`` times the best block's score is not quoted
either: a free slot is not a reason to quote something barely related. Nor is one whose
cosine is under ``SEMANTIC_FLOOR`` times the best block's (embedder scoring): words it
shares with the question ("one", "API", "request") do not make it answer ("how do I
stop one user from flooding the API" opened with a security summary holding "API" and
"user"), and a quoted list keeps only its items that pass the same floor against its
best item. The stage report lists the best blocks with their scores (``top_blocks``).

Each block is quoted as the chunk it cites has it: with the markers removed, the
answer is the chunk's own text (whitespace runs, a list item's number when the item is
quoted without its list, and a table's delimiter row aside). That proves the words exist,
not that they answer the question: the citations are checked like any answer's.

A passage flagged by the injection screen is never quoted: its text was written to
be read as instructions, and an answer that quotes it repeats them to the user as
the answer. When only flagged passages had something to quote, the answer declines
and says so. A unit holding text that reads as a citation marker ("x[1]") is never
quoted either: its brackets would be taken for citations.

A unit scoring under ``min_score`` (embedder scoring only) is never quoted; when
even the best one does, the stage answers nothing and the chain declines: retrieval
always returns *something* through BM25 for a question the collection has nothing on,
and quoting its best sentences reads as an answer. With MiniLM on samples/corpus
(2026-11-24, through the gateway), 20 questions about the documents had best scores
0.26-0.80, and 14 they have nothing on 0.10-0.47 (7 of them under 0.2): the default
0.2 declines half the off-topic questions and none of the others. The scale depends on
the embedding model, like the citation threshold's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.clients.interfaces import Embedder, Reranker
from groundwire_orchestrator.domain import Candidate, NumberedSource, StageReport
from groundwire_orchestrator.stages.rerank import RerankerLoadCache
from groundwire_orchestrator.text.blocks import CITED_WORDS, Block, blocks_of, render
from groundwire_orchestrator.text.passages import PassageVectors, cosine, model_of
from groundwire_orchestrator.text.prompting import DECLINE_PREFIX
from groundwire_orchestrator.text.quotes import Unit, cite, quotable_units
from groundwire_orchestrator.text.sentences import (
    MARKER,
    chunk_body,
    content_words,
    heading_label,
    overlap,
    strip_markers,
)

__all__ = [
    "FLAGGED_ONLY",
    "ExtractiveAnswerStage",
    "ExtractiveInput",
    "SynopsisReader",
    "cite",
    "is_synopsis",
]

SEMANTIC_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.2
TASK_WEIGHT = 0.2
"""The share of the question's words in what a block says it is about: the page's
title, the heading above it and its lead-in (an example's introduction)."""
MAX_BLOCK_CHARS = 700
"""A block longer than this is quoted by its parts (sentences, items, rows)."""
MAX_ANSWER_CHARS = 1600
"""The blocks after the first are quoted only while the answer stays under this."""
MAX_SCORED_CHARS = 1000
MAX_UNIT_CHARS = 400
MAX_CODE_CHARS = 800
MAX_CODE_LINES = 16
MMR_LAMBDA = 0.85
RELATIVE_FLOOR = 0.6
SEMANTIC_FLOOR = 0.8
"""A block whose cosine to the question is under this times the best block's is not
quoted (embedder scoring): shared words alone do not make it answer. Inside a quoted
list of MIN_LIST_ITEMS items or more, the same holds for an item against the best item.
Chosen on make demo's two questions (samples/corpus): 0.74-0.8 keeps the security
summary and the logging setting out of them; the tuning halves of evals/docs-answers
read the same at 0.8 as without it."""
MIN_LIST_ITEMS = 3
DUPLICATE_SIMILARITY = 0.9
POINTER_MAX_WORDS = 8
_IDENTIFIER_JOINS = re.compile(r"[_=./-]+")
PROCEDURE_BONUS = 0.1
_PROCEDURE = re.compile(
    r"^\W*(?:how (?:do|can|should|would) (?:i|we|you|one)|how to|(?:which|what) commands?)\b",
    re.IGNORECASE,
)
_OUTPUT = re.compile(
    r"^\W*(?:(?:sample|example|expected|command)\s+)?output\b", re.IGNORECASE
)
"""The line introducing a code block that is a command's output, not a command."""
_SYNOPSIS = re.compile(r"^\W*(?:synopsis|usage|syntax|signature)s?\W*$", re.IGNORECASE)
"""The heading of a reference page's command line or signature: man pages, npm and
CMake call it Synopsis, others Usage, Syntax or Signature."""
_POINTER = re.compile(
    r"^(?:see(?: also)?|refer to|read|for (?:more|details|further)\b[^,.]*,?\s*see)\b",
    re.IGNORECASE,
)

FLAGGED_ONLY = (
    f"{DECLINE_PREFIX}: the only passages that matched were flagged as possible prompt "
    "injection (text addressed to an AI model), and flagged passages are never quoted."
)
"""The answer when every passage with something to quote was flagged."""


SynopsisReader = Callable[[str], Awaitable[Sequence[NumberedSource]]]
"""A page's synopsis parts (``is_synopsis``) by its source id, numbered as the answer
may cite them; the pipeline reads them from the retriever when the excerpts lack them."""


def is_synopsis(candidate: Candidate) -> bool:
    """Whether a chunk is a page's Synopsis (Usage, Syntax, Signature) section."""
    return len(candidate.heading_path) > 1 and bool(_SYNOPSIS.match(candidate.heading_path[-1]))


@dataclass(frozen=True)
class ExtractiveInput:
    query: str
    sources: Sequence[NumberedSource]
    reason: str
    """Why the answer is extractive, for the stage report."""
    dependency: str = "llm"
    read_synopsis: SynopsisReader | None = None
    """A how-to answer's page synopsis when no excerpt holds it (None: excerpts only)."""


@dataclass(frozen=True)
class _Candidate:
    number: int
    block: Block
    scored: str
    """The text scored against the query: the block without Markdown markup, under its
    heading (a code block's identifiers split into words, a table row with its header)."""
    flagged: bool
    section: str = ""
    """The heading the block sits under: its words count in the word overlap."""
    task: str = ""
    """What the block says it is about: the page's title, its heading and lead-in."""
    label: str = ""
    """Where it is, as the answer shows it: "Title > Section"."""
    pieces: tuple[str, ...] = ()
    """Its units' texts as embedded: a block's cosine is its best unit's (the sentence
    vectors are the ones the citation check embeds too, so they are embedded once)."""
    page: str = ""
    """The source it is from: its page's synopsis goes with it (see ``synopsis_of``)."""


def pointer_only(plain: str) -> bool:
    """Whether a sentence only points elsewhere ("See Git Authentication.", "For
    details, see the reranker page."): it answers nothing when quoted."""
    return bool(_POINTER.match(plain)) and len(plain.split()) <= POINTER_MAX_WORDS


def _keepable(unit: Unit) -> bool:
    """Whether a unit may be quoted inside a block."""
    if MARKER.search(unit.text):  # "x[1]" would be read as a citation
        return False
    if unit.kind == "row":
        return len(content_words(unit.text)) >= 2 and len(unit.text) <= MAX_UNIT_CHARS
    if unit.kind == "code":
        lines = unit.text.count("\n") + 1
        return (
            len(unit.text) <= MAX_CODE_CHARS
            and lines <= MAX_CODE_LINES
            and len(content_words(unit.text)) >= 3
        )
    return not pointer_only(strip_markers(unit.text)) and len(unit.text) <= MAX_UNIT_CHARS


def _quotable(block: Block, *, synopsis: bool = False) -> bool:
    """Whether a block says enough to be quoted: something in it is cited (code, or a
    sentence or row of CITED_WORDS content words); a lone sentence or item needs five
    words and must not end as a lead-in to something left out. Under a synopsis heading
    a command line of two words or more is enough ("**buildah tag** *name*")."""
    if synopsis:
        return any(u.kind == "code" or len(content_words(u.text)) >= 2 for u in block.units)
    if not any(u.kind == "code" or len(content_words(u.text)) >= CITED_WORDS
               for u in block.units):
        return False
    if len(block.units) > 1 or block.kind in ("code", "table"):
        return True
    plain = strip_markers(block.units[0].text)
    return len(plain.split()) >= 5 and block.units[0].text.rstrip()[-1] not in ":;,"


def _plain(unit: Unit) -> str:
    if unit.kind == "code":
        # identifiers split into words: GROUNDWIRE_EMBEDDER_PORT says "embedder"
        return _IDENTIFIER_JOINS.sub(" ", "\n".join(unit.text.splitlines()[1:-1]))
    if unit.kind == "row":  # with its header ("| setting | default |")
        return " ".join(f"{unit.context} {unit.text}".replace("|", " ").split())
    return strip_markers(unit.text)


def _piece(unit: Unit, heading: str) -> str:
    """A unit's text as embedded: code blocks and table rows say little in words, so
    they are embedded under their heading (and a code block with its introduction)."""
    if unit.kind == "code":
        return f"{heading}: {strip_markers(unit.context)}\n{_plain(unit)}".strip(": \n")
    if unit.kind == "row":
        return " ".join(f"{heading}: {_plain(unit)}".split())
    return strip_markers(unit.text)


def _candidates(src: NumberedSource) -> list[_Candidate]:
    out = []
    cand = src.candidate
    path = cand.heading_path
    section = path[-1] if len(path) > 1 else ""  # the first is the document's title
    label = heading_label(cand)
    units = quotable_units(chunk_body(cand))
    for block in blocks_of(units, max_chars=MAX_BLOCK_CHARS, keep=_keepable):
        heading = block.heading or section
        if not _quotable(block, synopsis=bool(_SYNOPSIS.match(heading))):
            continue
        body = " ".join(_plain(u) for u in block.units)
        scored = f"{heading}: {body}".strip(": ")[:MAX_SCORED_CHARS]
        # the page's file name too: reference pages are named after what they document
        # ("put-bucket-lifecycle-configuration.rst", "target_sources.rst")
        name = cand.source_id.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        task = _IDENTIFIER_JOINS.sub(
            " ", f"{cand.title} {name} {heading} {strip_markers(block.lead)}"
        )
        where = label if not block.heading or label.endswith(block.heading) else (
            f"{label} > {block.heading}" if label else block.heading
        )
        pieces = tuple(dict.fromkeys(_piece(u, heading) for u in block.units))
        out.append(_Candidate(src.number, block, scored, cand.injection_flagged, heading,
                              task, where, pieces, cand.source_id))
    return out


def synopsis_of(page: str, candidates: Sequence[_Candidate]) -> int | None:
    """The index of ``page``'s synopsis among ``candidates``: a code block under a
    Synopsis (Usage, Syntax, Signature) heading, not flagged, else the first paragraph
    there (man pages written in Markdown set the command line in bold: "**buildah
    build** [*options*]"); None when its excerpts hold neither."""
    under = [i for i, c in enumerate(candidates)
             if c.page == page and not c.flagged and _SYNOPSIS.match(c.section)]
    code = [i for i in under if candidates[i].block.has_code]
    prose = [i for i in under if candidates[i].block.kind == "prose"]
    found = code or prose
    return found[0] if found else None


def answering_items(candidate: _Candidate, cosines: Mapping[str, float]) -> Block:
    """A list block without the items far in meaning from the question (under
    SEMANTIC_FLOOR times its best item's cosine), with its introduction; any other
    block, or a list of fewer than MIN_LIST_ITEMS items, as it is."""
    block = candidate.block
    items = [u for u in block.units if u.kind == "item"]
    if block.kind != "list" or len(items) < MIN_LIST_ITEMS:
        return block
    near = {id(u): cosines.get(_piece(u, candidate.section), 0.0) for u in items}
    floor = SEMANTIC_FLOOR * max(near.values())
    kept = tuple(u for u in block.units if u.kind != "item" or near[id(u)] >= floor)
    if len(kept) == len(block.units):
        return block
    return dataclasses.replace(block, units=kept, whole_list=False)


def runnable(block: Block) -> bool:
    """Whether a block holds code that is not introduced as output ("Output:", or under
    a bold "**Output:**" line, which reads as a heading)."""
    return any(u.kind == "code" and not _OUTPUT.match(strip_markers(u.context or u.heading))
               for u in block.units)


def compose(quoted: Sequence[tuple[Block, int, str]]) -> str:
    """The answer text of cited blocks, in the given order: each block whole (see
    text.blocks.render), under the line naming where it is ("*Title > Section*:"),
    once for consecutive blocks from one place."""
    parts: list[str] = []
    last = ""
    for block, number, where in quoted:
        if where and where != last:
            parts.append(f"*{where}*:")
        last = where
        parts.append(render(block, number))
    return "\n\n".join(parts)


def _similarity(
    a: int, b: int, vectors: Sequence[Sequence[float]] | None, words: Sequence[set[str]]
) -> float:
    """How alike two units are: embedder cosine, else the word overlap (Jaccard)."""
    if vectors is not None:
        return cosine(vectors[a], vectors[b])
    union = words[a] | words[b]
    return len(words[a] & words[b]) / len(union) if union else 1.0


def select_mmr(
    ranked: Sequence[int],
    relevance: Sequence[float],
    numbers: Sequence[int],
    similarity: Callable[[int, int], float],
    *,
    limit: int,
    per_source: int,
) -> list[int]:
    """Up to ``limit`` of ``ranked`` chosen by maximal marginal relevance, at most
    ``per_source`` per source number; near-duplicates of a chosen unit (similarity
    at least DUPLICATE_SIMILARITY) are never chosen."""
    chosen: list[int] = []
    per: dict[int, int] = {}
    pool = list(ranked)
    while pool and len(chosen) < limit:
        best, best_value = -1, -float("inf")
        for i in pool:
            if per.get(numbers[i], 0) >= per_source:
                continue
            redundancy = max((similarity(i, j) for j in chosen), default=0.0)
            if redundancy >= DUPLICATE_SIMILARITY:
                continue
            value = MMR_LAMBDA * relevance[i] - (1 - MMR_LAMBDA) * redundancy
            if value > best_value:
                best, best_value = i, value
        if best < 0:
            break
        chosen.append(best)
        per[numbers[best]] = per.get(numbers[best], 0) + 1
        pool.remove(best)
    return chosen


class ExtractiveAnswerStage:
    def __init__(
        self,
        embedder: Embedder | None,
        *,
        max_blocks: int = 3,
        per_source: int = 2,
        from_sources: int = 8,
        max_embedded: int = 64,
        min_score: float = 0.0,
        passages: PassageVectors | None = None,
        reranker: Reranker | None = None,
        rerank_timeout_s: float = 2.0,
        load: RerankerLoadCache | None = None,
    ) -> None:
        """``passages``: the chunk-text vectors shared with the citation check (one of
        this stage's own when None). ``min_score``: the score a sentence needs to be
        quoted (embedder scoring); nothing is answered when no sentence has it (0 =
        always answer). ``reranker``: scores the units when it answers (the embedder
        otherwise). ``load``: the reranker's Info cache shared with the rerank stage
        (one of this stage's own when None)."""
        self._embedder = embedder
        if passages is None and embedder is not None:
            passages = PassageVectors(embedder)
        self._passages = passages
        self._max_blocks = max_blocks
        self._per_source = per_source
        self._from_sources = from_sources
        self._max_embedded = max_embedded
        self._min_score = min_score
        self._reranker = reranker
        self._rerank_timeout_s = rerank_timeout_s
        # the reranker's Info, cached: a reranker with no model (the offline profile)
        # is not asked to score every answer's units
        if load is None and reranker is not None:
            load = RerankerLoadCache(reranker, ttl_s=1.0, timeout_s=min(rerank_timeout_s, 1.0))
        self._load = load if reranker is not None else None

    async def _semantic(
        self, query: str, candidates: Sequence[_Candidate]
    ) -> tuple[list[float], list[Sequence[float]], dict[str, float]] | None:
        """Each block's cosine to the query (its best unit's), its vector (the mean of
        its units') and each unit's cosine by its embedded text; None without the
        embedder."""
        if self._embedder is None or self._passages is None:
            return None
        texts = list(dict.fromkeys(t for x in candidates for t in x.pieces))
        q, got = await asyncio.gather(
            self._embedder.embed([query], query=True),
            self._passages.get(texts),  # chunk text: kept
        )
        qv = q[0].dense
        if qv is None:
            return None
        vectors = (await self._passages.of_model(got, texts, model_of(q[0]))).vectors
        if any(t not in vectors for t in texts):
            return None
        cosines = {t: cosine(qv, vectors[t]) for t in texts}
        scores = [max(cosines[t] for t in x.pieces) for x in candidates]
        means: list[Sequence[float]] = [
            [sum(col) / len(x.pieces) for col in zip(*(vectors[t] for t in x.pieces), strict=True)]
            for x in candidates
        ]
        return scores, means, cosines

    async def _cross_encoder(
        self, query: str, candidates: Sequence[_Candidate], details: dict[str, str]
    ) -> list[float] | None:
        """Each unit's cross-encoder score, or None (no reranker, no model loaded, or it
        failed)."""
        if self._reranker is None or self._load is None:
            return None
        try:
            if not (await self._load.get()).ready:
                return None
            scored = await self._reranker.rerank(
                query,
                [c.scored for c in candidates],
                top_n=len(candidates),
                threshold=0.0,
                timeout_s=self._rerank_timeout_s,
            )
        except GroundwireError as error:
            details["cross_encoder"] = f"unavailable: {error.message}"
            return None
        scores = [0.0] * len(candidates)
        for i, score in scored:
            if 0 <= i < len(candidates):
                scores[i] = score
        return scores

    async def run(self, inp: ExtractiveInput) -> tuple[str, StageReport]:
        """The cited extractive answer: "" when no excerpt has a usable unit, or
        FLAGGED_ONLY when only passages flagged by the injection screen had one."""
        started = time.perf_counter()
        top = inp.sources[: self._from_sources]
        # flagged passages are scored like the rest (to tell the reader when only they
        # matched) but never quoted; a unit that repeats an earlier one's words is
        # dropped (overlapping chunks, a sentence repeated across pages)
        candidates: list[_Candidate] = []
        seen: set[tuple[str, ...]] = set()
        for c in (c for src in top for c in _candidates(src)):
            key = tuple(content_words(c.scored))
            if key not in seen:
                seen.add(key)
                candidates.append(c)
        every = list(candidates)  # before the embedding budget leaves some out
        details = {"mode": "extractive", "blocks_considered": str(len(candidates))}
        flagged = [str(s.number) for s in top if s.candidate.injection_flagged]
        if flagged:
            details["flagged_not_quoted"] = ", ".join(flagged)

        def finish(answer: str) -> tuple[str, StageReport]:
            ms = (time.perf_counter() - started) * 1e3
            return answer, StageReport("answer", ms, True, inp.reason, inp.dependency, details)

        if not candidates:
            details["blocks"] = "0"
            return finish("")
        query_words = content_words(inp.query)
        lexical = [
            overlap(query_words, content_words(f"{c.section} {c.scored}")) for c in candidates
        ]
        # the question's words in what the block says it is about (title, heading,
        # lead-in): "enable versioning" asks for the example introduced as "enables
        # versioning on a bucket", not for a block that mentions versioning in passing
        task = [overlap(query_words, content_words(c.task)) for c in candidates]
        if sum(len(c.pieces) for c in candidates) > self._max_embedded:
            # only some blocks are embedded (cost), up to max_embedded units: each
            # excerpt's in turn, those sharing most words with the query first (ranked
            # by words alone, one long excerpt's blocks crowded out another's best
            # paragraph); flagged ones last, since they are never quoted
            rank: dict[int, int] = {}
            for i in sorted(range(len(candidates)), key=lambda i: -lexical[i] - task[i]):
                rank[i] = sum(1 for j in rank if candidates[j].number == candidates[i].number)
            order = sorted(
                range(len(candidates)),
                key=lambda i: (candidates[i].flagged, rank[i], -lexical[i] - task[i], i),
            )
            keep: list[int] = []
            units = 0
            for i in order:
                if keep and units + len(candidates[i].pieces) > self._max_embedded:
                    continue
                keep.append(i)
                units += len(candidates[i].pieces)
            keep = sorted(keep)
            candidates = [candidates[i] for i in keep]
            lexical = [lexical[i] for i in keep]
            task = [task[i] for i in keep]
        vectors: list[Sequence[float]] | None = None
        try:
            semantic = await self._semantic(inp.query, candidates)
        except GroundwireError as error:
            semantic = None
            details["scoring"] = f"word overlap (embedder unavailable: {error.message})"
        if semantic is not None:
            vectors = semantic[1]
        crossed = await self._cross_encoder(inp.query, candidates, details)
        if crossed is not None:
            scores, floor = crossed, 0.0  # the coverage stage judged the question already
            details["scoring"] = "cross-encoder"
        elif semantic is not None:
            scores = [
                SEMANTIC_WEIGHT * semantic[0][i] + LEXICAL_WEIGHT * lexical[i]
                + TASK_WEIGHT * task[i]
                for i in range(len(candidates))
            ]
            floor = self._min_score
            details["scoring"] = "embedder + word overlap"
        else:
            scores, floor = lexical, 0.0  # word shares are on another scale
            details.setdefault("scoring", "word overlap")
        procedure = bool(_PROCEDURE.match(inp.query))
        if procedure:
            # "how do I ..." is answered by the commands more often than by the prose
            # around them, and code says little in words the question shares
            scores = [
                s + PROCEDURE_BONUS if runnable(c.block) else s
                for s, c in zip(scores, candidates, strict=True)
            ]
            details["code_bonus"] = f"{PROCEDURE_BONUS:g} (a how-to question)"
        best = max(scores)
        details["best_score"] = f"{best:.3f}"
        ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        # the best few, chosen or not: why an answer quoted what it did
        details["top_blocks"] = "; ".join(
            f"[{candidates[i].number}] {scores[i]:.3f} {candidates[i].label}"
            for i in ranked[:6]
        )
        # a weak unit is never quoted: under the floor, or far below the best one (a
        # free slot is not a reason to quote something barely related)
        ranked = [i for i in ranked if scores[i] >= max(floor, RELATIVE_FLOOR * best)]
        if crossed is None and semantic is not None:
            # nor is a block whose meaning is far from the question's, whatever words it
            # shares with it: "one", "API", "request" put a security summary and a
            # logging setting before the rate-limit and design-rule blocks (make demo)
            # against the best block that may be quoted: a flagged passage close to the
            # question must not push every other block under the floor
            quotable = [v for v, c in zip(semantic[0], candidates, strict=True)
                        if not c.flagged] or semantic[0]
            near = SEMANTIC_FLOOR * max(quotable)
            ranked = [i for i in ranked if semantic[0][i] >= near]
        if not ranked:
            details["declined"] = f"best block score {best:.3f} < {floor}"
        matched_flagged = any(candidates[i].flagged for i in ranked)
        ranked = [i for i in ranked if not candidates[i].flagged]
        words = [set(content_words(c.scored)) for c in candidates]
        chosen = select_mmr(
            ranked,
            scores,
            [c.number for c in candidates],
            lambda a, b: _similarity(a, b, vectors, words),
            limit=self._max_blocks,
            per_source=self._per_source,
        )
        if semantic is not None:
            # a list's items are points of their own: one that answers does not bring
            # the others along ("Abuse limits" out of a hardening checklist)
            for i in chosen:
                candidates[i] = dataclasses.replace(
                    candidates[i], block=answering_items(candidates[i], semantic[2])
                )
        if procedure and chosen:
            # the command itself: a how-to answer from a reference page states the page's
            # synopsis, which shares too few words with the question to be chosen by its
            # score ("find out which of my dependencies pulled in a package" quoted
            # npm-explain's description, "this command will print the chain...", and
            # never `npm explain <package-spec>`: evals/docs-answers, the npm set)
            page = candidates[chosen[0]].page
            found = synopsis_of(page, every)
            if found is None and inp.read_synopsis is not None:
                # a page cut at its headings leaves the synopsis a chunk of its own,
                # rarely among the excerpts: it shares few words with any question
                try:
                    parts = await inp.read_synopsis(page)
                except GroundwireError as error:
                    details["synopsis"] = f"not read: {error.message}"
                    parts = ()
                every.extend(c for src in parts for c in _candidates(src))
                found = synopsis_of(page, every)
            if found is not None and every[found] not in (candidates[i] for i in chosen):
                if every[found] not in candidates:  # not embedded: not scored either
                    candidates.append(every[found])
                    scores = [*scores, 0.0]
                chosen.insert(1, candidates.index(every[found]))
                details["synopsis"] = every[found].label
        # a few blocks, not a page: after the best one, only those that fit the budget
        fitting: list[int] = []
        used = 0
        for i in chosen:
            size = candidates[i].block.chars
            if not fitting or used + size <= MAX_ANSWER_CHARS:
                fitting.append(i)
                used += size
        chosen = fitting
        # the best block's excerpt first, then the others by their best block; within
        # an excerpt, in its own order. Read by source number, the answer opened with
        # whatever the first excerpt had ("does a request still succeed when one part
        # is broken?" began with a logging setting, the design rule came second)
        lead: dict[int, int] = {}
        for place, i in enumerate(chosen):  # chosen is in MMR order: best first
            lead.setdefault(candidates[i].number, place)
        chosen.sort(key=lambda i: (lead[candidates[i].number], candidates[i].block.position))
        answer = compose(
            [(candidates[i].block, candidates[i].number, candidates[i].label) for i in chosen]
        )
        details["blocks"] = str(len(chosen))
        details["kinds"] = ", ".join(candidates[i].block.kind for i in chosen)
        details["scores"] = ", ".join(f"{scores[i]:.3f}" for i in chosen)
        if not chosen and matched_flagged:
            details["declined"] = "only passages flagged as possible injection matched"
            return finish(FLAGGED_ONLY)
        return finish(answer)
