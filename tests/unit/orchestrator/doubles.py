"""In-process fakes of what the orchestrator's stages call: an LLMProvider with a
script per model role, a bag-of-words embedder, an in-memory retriever and a
reranker with settable load. No network; deterministic."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from groundwire_core.clients.embedder import EmbedderInfo, TextEmbedding
from groundwire_core.errors import GroundwireError, InvalidInput, Unavailable
from groundwire_orchestrator.clients.reranker import RerankerLoad
from groundwire_orchestrator.clients.retriever import CollectionInfo, HybridQuery, PathSummary
from groundwire_orchestrator.domain import Candidate
from groundwire_orchestrator.llm.base import LLMRequest, StreamEvent, TextDelta, ToolCall

# ------------------------------------------------------------------------ LLM


@dataclass
class Scripted:
    """One reply of the fake LLM: text (streamed in ``chunks`` pieces), tool calls after
    it, an error raised before anything (or after ``error_after`` chunks), a delay."""

    text: str | list[str] = ""
    tool_calls: Sequence[ToolCall] = ()
    error: GroundwireError | None = None
    error_after: int | None = None
    delay_s: float = 0.0

    def pieces(self) -> list[str]:
        if isinstance(self.text, list):
            return self.text
        return re.findall(r"\S+\s*|\s+", self.text)


Item = Scripted | str | Callable[[LLMRequest], "Scripted | str"]


class ScriptedLLM:
    """An LLMProvider answering from a queue per role ("fast", "strong"); when a queue
    is empty, ``default`` answers for that role (an error if there is none)."""

    def __init__(
        self,
        *,
        fast: Iterable[Item] = (),
        strong: Iterable[Item] = (),
        default_fast: Item | None = None,
        default_strong: Item | None = None,
        name: str = "fake",
    ) -> None:
        self._queues: dict[str, deque[Item]] = {"fast": deque(fast), "strong": deque(strong)}
        self._defaults = {"fast": default_fast, "strong": default_strong}
        self._name = name
        self.requests: list[LLMRequest] = []
        self.closed = False

    @property
    def name(self) -> str:
        return self._name

    def requests_for(self, role: str) -> list[LLMRequest]:
        return [r for r in self.requests if r.role == role]

    def _next(self, request: LLMRequest) -> Scripted:
        self.requests.append(request)
        queue = self._queues[request.role]
        item = queue.popleft() if queue else self._defaults[request.role]
        if item is None:
            raise AssertionError(f"the fake LLM has no {request.role} reply left")
        if callable(item) and not isinstance(item, Scripted):
            item = item(request)
        return Scripted(text=item) if isinstance(item, str) else item

    async def stream(self, request: LLMRequest, *, timeout_s: float) -> AsyncIterator[StreamEvent]:
        reply = self._next(request)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.error is not None and reply.error_after is None:
            raise reply.error
        for i, piece in enumerate(reply.pieces()):
            if reply.error is not None and i == reply.error_after:
                raise reply.error
            yield TextDelta(piece)
        for call in reply.tool_calls:
            yield call

    async def complete(self, request: LLMRequest, *, timeout_s: float) -> str:
        reply = self._next(request)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.error is not None:
            raise reply.error
        return "".join(reply.pieces())

    async def aclose(self) -> None:
        self.closed = True


# ------------------------------------------------------------------- embedder

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of to and or in on for is are be it this that with as by".split())
DIMS = 256


def bag_vector(text: str) -> tuple[float, ...]:
    """A normalised hashed bag of words: cosine ~ shared vocabulary."""
    vec = [0.0] * DIMS
    for word in _TOKEN.findall(text.lower()):
        if word in _STOP:
            continue
        stem = word[:-1] if len(word) > 4 and word.endswith("s") else word
        h = int.from_bytes(hashlib.blake2b(stem.encode(), digest_size=4).digest(), "big")
        vec[h % DIMS] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return tuple(v / norm for v in vec)


class FakeEmbedder:
    """Serves ``model_id``; like the real embedder, asking for the sparse output of a
    model without one is INVALID_ARGUMENT. Tests redeploy it by changing the fields."""

    def __init__(self, *, down: bool = False, sparse: bool = False) -> None:
        self.down = down
        self.sparse = sparse
        self.model_id = "fake/bag"
        self.calls: list[tuple[tuple[str, ...], bool]] = []
        self.info_calls = 0

    async def info(self) -> EmbedderInfo:
        self.info_calls += 1
        if self.down:
            raise Unavailable("the embedder is down", dependency="embedder")
        outputs = frozenset({"dense", "sparse"} if self.sparse else {"dense"})
        return EmbedderInfo(self.model_id, "fake", DIMS, 512, outputs)

    async def embed(
        self, texts: Sequence[str], *, query: bool, outputs: Sequence[str] = ("dense",)
    ) -> list[TextEmbedding]:
        self.calls.append((tuple(texts), query))
        if self.down:
            raise Unavailable("the embedder is down", dependency="embedder")
        if "sparse" in outputs and not self.sparse:
            raise InvalidInput("outputs asks for sparse, which this model does not serve")
        return [
            TextEmbedding(
                dense=bag_vector(t),
                sparse={len(t): 1.0} if "sparse" in outputs else None,
                tokens=len(t.split()),
                truncated=False,
                model=self.model_id,
            )
            for t in texts
        ]

    @property
    def embedded(self) -> list[str]:
        return [t for texts, _ in self.calls for t in texts]


# ------------------------------------------------------------------ retriever


def chunk(
    n: int,
    text: str,
    *,
    source: str | None = None,
    title: str = "Doc",
    heading: Sequence[str] = (),
    index: int = 0,
    score: float = 0.0,
) -> Candidate:
    """A candidate whose stored text carries its heading-path line, like the chunker's."""
    path = (title, *heading)
    return Candidate(
        chunk_id=f"c{n}",
        source_id=source or f"doc{n}.md",
        title=title,
        heading_path=path,
        url=f"https://example.test/{source or f'doc{n}'}",
        text=f"{' > '.join(path)}\n\n{text}",
        score=score,
        fused_score=score,
        chunk_index=index,
    )


@dataclass
class FakeRetriever:
    chunks: list[Candidate] = field(default_factory=list)
    filterable: frozenset[str] = frozenset({"source_id", "doc_type", "title"})
    queries: list[HybridQuery] = field(default_factory=list)
    describes: list[str] = field(default_factory=list)
    down: bool = False

    async def describe(self, collection: str) -> CollectionInfo:
        self.describes.append(collection)
        if self.down:
            raise Unavailable("the retriever is down", dependency="retriever")
        return CollectionInfo(collection, self.filterable)

    async def search(self, query: HybridQuery) -> tuple[list[Candidate], list[PathSummary]]:
        self.queries.append(query)
        if self.down:
            raise Unavailable("the retriever is down", dependency="retriever")
        pool = self.chunks
        for f in query.filters:
            pool = [c for c in pool if getattr(c, f.field, None) in f.any_of]
        scored = []
        words = set(_TOKEN.findall(query.text.lower())) - _STOP
        for c in pool:
            dense = (
                sum(a * b for a, b in zip(query.dense, bag_vector(c.text), strict=True))
                if query.dense is not None
                else 0.0
            )
            lexical = len(words & set(_TOKEN.findall(c.text.lower())))
            if dense >= query.dense_floor or lexical:
                scored.append((dense + 0.1 * lexical, c))
        scored.sort(key=lambda t: -t[0])
        found = [dataclasses.replace(c, score=s, fused_score=s) for s, c in scored[: query.limit]]
        return found, [PathSummary("dense", 0.1, len(found), False, "")]


# ------------------------------------------------------------------- reranker


@dataclass
class FakeReranker:
    load_value: RerankerLoad = field(default_factory=lambda: RerankerLoad(True, 0, 0.0, 256))
    error: GroundwireError | None = None
    load_error: GroundwireError | None = None
    scores: Callable[[str, str], float] | None = None
    calls: list[tuple[str, tuple[str, ...], int, float]] = field(default_factory=list)
    load_calls: int = 0

    async def load(self, *, timeout_s: float) -> RerankerLoad:
        self.load_calls += 1
        if self.load_error is not None:
            raise self.load_error
        return self.load_value

    async def rerank(
        self, query: str, passages: Sequence[str], *, top_n: int, threshold: float, timeout_s: float
    ) -> list[tuple[int, float]]:
        self.calls.append((query, tuple(passages), top_n, threshold))
        if self.error is not None:
            raise self.error
        score = self.scores or (
            lambda q, p: sum(a * b for a, b in zip(bag_vector(q), bag_vector(p), strict=True))
        )
        ranked = sorted(((i, score(query, p)) for i, p in enumerate(passages)), key=lambda t: -t[1])
        return [(i, s) for i, s in ranked if s >= threshold][:top_n]
