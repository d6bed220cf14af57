"""The agent's tools: ``search`` (a reformulated query through the same retrieval
path; new sources get the next numbers) and ``read_document`` (a source's chunks
stitched in order, capped). One toolbox per request: it shares the request's source
ledger, so a number never changes meaning."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.domain import Candidate, NumberedSource
from groundwire_orchestrator.llm.base import ToolCall
from groundwire_orchestrator.stages.retrieval import SourceReader
from groundwire_orchestrator.stages.screening import flag
from groundwire_orchestrator.text.ledger import SourceLedger
from groundwire_orchestrator.text.prompting import format_excerpt
from groundwire_orchestrator.text.sentences import approx_tokens

Searcher = Callable[[str], Awaitable[Sequence[Candidate]]]
"""Runs a query through retrieval, rerank and screening; best first."""

MAX_QUERY_CHARS = 500


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    """What the model reads as the tool's result."""
    new_sources: tuple[NumberedSource, ...]
    trace: str
    """One line for the stage report, e.g. "search(rate limits) -> 3 new"."""


class AgentToolbox:
    def __init__(
        self,
        *,
        searcher: Searcher,
        reader: SourceReader,
        ledger: SourceLedger,
        collection: str,
        search_results: int,
        result_tokens: int,
    ) -> None:
        self._searcher = searcher
        self._reader = reader
        self._ledger = ledger
        self._collection = collection
        self._search_results = search_results
        self._result_tokens = result_tokens

    async def execute(self, call: ToolCall) -> ToolOutcome:
        """Runs one tool call; failures become a result the model can read (the loop
        goes on), never an exception."""
        try:
            if call.name == "search":
                return await self._search(call.arguments)
            if call.name == "read_document":
                return await self._read(call.arguments)
        except GroundwireError as error:
            return ToolOutcome(f"The tool failed: {error.message}", (),
                               f"{call.name} failed: {error.message}")
        return ToolOutcome(f"There is no tool named {call.name!r}.", (),
                           f"unknown tool {call.name!r}")

    def _fit(self, candidates: Sequence[Candidate], limit: int) -> list[Candidate]:
        """The leading candidates whose excerpts fit the result budget."""
        kept: list[Candidate] = []
        used = 0
        for cand in candidates[:limit]:
            cost = approx_tokens(format_excerpt(NumberedSource(0, cand)))
            if kept and used + cost > self._result_tokens:
                break
            kept.append(cand)
            used += cost
        return kept

    async def _search(self, args: Mapping[str, Any]) -> ToolOutcome:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolOutcome("The search tool needs a non-empty \"query\" string.", (),
                               "search with no query")
        query = " ".join(query.split())[:MAX_QUERY_CHARS]
        found = await self._searcher(query)
        fresh = [c for c in found if self._ledger.number_of(c.chunk_id) is None]
        added = self._ledger.add(self._fit(fresh, self._search_results))
        trace = f"search({query[:80]}) -> {len(added)} new"
        if not added:
            return ToolOutcome(
                "No new excerpts: the search found only excerpts you already have, or "
                "nothing.", (), trace,
            )
        body = "\n\n".join(format_excerpt(s) for s in added)
        return ToolOutcome(f"<excerpts>\n{body}\n</excerpts>", tuple(added), trace)

    async def _read(self, args: Mapping[str, Any]) -> ToolOutcome:
        number = args.get("number")
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        src = self._ledger.get(number) if isinstance(number, int) else None
        if src is None:
            return ToolOutcome(f"There is no excerpt [{number}].", (),
                               f"read_document({number}): no such excerpt")
        stored = await self._reader.read(
            self._collection, src.candidate.source_id, src.candidate.text[:1000]
        )
        chunks = self._fit([flag(c) for c in stored], len(stored)) or [src.candidate]
        added = self._ledger.add(chunks)
        numbered = []
        for cand in chunks:
            n = self._ledger.number_of(cand.chunk_id)
            if n is not None:
                numbered.append(NumberedSource(n, cand))
        body = "\n\n".join(format_excerpt(s) for s in numbered)
        cut = len(stored) - len(chunks)
        if cut > 0:
            body += f"\n(the document continues: {cut} more parts were cut)"
        trace = f"read_document({number}) -> {len(numbered)} parts, {len(added)} new"
        return ToolOutcome(f"<excerpts>\n{body}\n</excerpts>", tuple(added), trace)
