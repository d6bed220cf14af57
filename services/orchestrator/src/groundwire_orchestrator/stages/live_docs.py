"""Live documentation: when the collection does not cover an in-domain question, look
the answer up on the documentation sites the collection was synced from.

The docs assistant we learned from (``docs-assistant-corpus-plus-live-docs``) answers
from its curated corpus; when the corpus falls short on a question about its own
domain, it searches the vendor's documentation live (allowed domains only, at most 3
lookups) and cites those pages; out-of-scope questions are still refused without
searching. Here:

- The stage runs only after the coverage stage found the collection short: not
  covered, or covered thinly (``Coverage.thin``: weak evidence, answered from the
  collection, live pages added first); a question covered well never leaves the
  collection.
- **In-domain** is decided from the same evidence the coverage stage weighs (over
  the collection's own candidates): the question names nothing that no candidate
  contains (a name the collection never mentions is another product: out of scope,
  as the coverage stage's names rule has it), and its hybrid evidence (dense cosine
  and share of its words) is at least ``min_evidence``: below the coverage
  threshold, above what questions about other subjects reach. An out-of-scope
  question is declined as before, with no lookup.
- The lookup: with a provider that has its own web search (Anthropic), the answer's
  request carries that tool, restricted to the allowed domains with ``max_uses`` =
  ``max_lookups`` (``WebSearch``), and no page is fetched here; otherwise (an
  OpenAI-compatible provider, or no LLM) the retriever's ``LookupLive`` fetches at most
  ``max_lookups`` pages and returns their best sections, which become the answer's
  candidates marked ``live`` with their URL and fetch time. They go through screening
  and the citation check like any passage, and the extractive answer answers from
  them when there is no LLM.
- The stage never raises: a failed lookup is reported and the chain goes on as if
  there were none (the normal decline). Its report says whether it ran, why not,
  how many lookups were made and pages fetched, and each refusal with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from groundwire_core.errors import GroundwireError
from groundwire_orchestrator.domain import Candidate, LiveLookupResult, StageReport
from groundwire_orchestrator.llm.base import WebSearch
from groundwire_orchestrator.stages.coverage import Coverage, hybrid_evidence


class LiveLookupClient(Protocol):
    """The retriever's ``LookupLive`` (clients/retriever.py)."""

    async def lookup_live(
        self, collection: str, query: str, *, max_lookups: int, limit: int, timeout_s: float
    ) -> LiveLookupResult: ...

    async def allowed_domains(self, collection: str) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class LiveDocsParams:
    max_lookups: int = 3
    """0 = off."""
    min_evidence: float = 0.3
    """Hybrid evidence (coverage's formula) a question needs to count as in-domain.
    Not fitted: between the off-topic questions of evals/declines (~0.05-0.2 with
    MiniLM) and the coverage threshold (0.52)."""
    dense_weight: float = 0.35
    top_k: int = 20
    sections: int = 5
    timeout_s: float = 30.0
    provider_search: bool = False
    """The answering provider has its own web search (Anthropic): offer it instead of
    fetching pages here."""


@dataclass(frozen=True)
class LiveDocsInput:
    collection: str
    query: str
    """The question as searched (standalone)."""
    coverage: Coverage
    candidates: Sequence[Candidate]
    """The collection's candidates, best first (the coverage stage's input)."""


@dataclass(frozen=True)
class LiveDocsOutcome:
    candidates: tuple[Candidate, ...] = ()
    """Live candidates to answer from (empty: none, or the provider searches)."""
    search: WebSearch | None = None
    """The provider's web search to offer, when it does the lookup."""


class LiveDocsStage:
    def __init__(self, client: LiveLookupClient, params: LiveDocsParams) -> None:
        self._client = client
        self._params = params

    @property
    def enabled(self) -> bool:
        return self._params.max_lookups > 0

    def in_domain(self, query: str, candidates: Sequence[Candidate]) -> tuple[bool, str]:
        """Whether the question is about the collection's subject, and why not."""
        p = self._params
        h = hybrid_evidence(query, candidates[: p.top_k], dense_weight=p.dense_weight)
        if h.unknown_names:
            return False, (
                f"out of scope: the question names {', '.join(h.unknown_names)}, which no "
                "passage of the collection contains"
            )
        if h.passing_names:
            return False, (
                f"out of scope: the question names {', '.join(h.passing_names)}, which the "
                "collection mentions only in passing"
            )
        if h.evidence < p.min_evidence:
            return False, f"out of scope: hybrid evidence {h.evidence:.3f} < {p.min_evidence:g}"
        return True, ""

    async def run(self, inp: LiveDocsInput) -> tuple[LiveDocsOutcome, StageReport]:
        """The live candidates (or the provider search to offer); never raises."""
        started = time.perf_counter()
        p = self._params
        details: dict[str, str] = {"lookups": "0"}

        def done(
            outcome: LiveDocsOutcome, *, fallback: bool = False, reason: str = "", dep: str = ""
        ) -> tuple[LiveDocsOutcome, StageReport]:
            ms = (time.perf_counter() - started) * 1e3
            return outcome, StageReport("live_docs", ms, fallback, reason, dep, details)

        if inp.coverage.covered and not inp.coverage.thin:
            details["skipped"] = "the collection covers the question"
            return done(LiveDocsOutcome())
        domain, why = self.in_domain(inp.query, inp.candidates)
        if not domain:
            details["skipped"] = why
            return done(LiveDocsOutcome())
        try:
            if p.provider_search:
                domains = await self._client.allowed_domains(inp.collection)
                details.update(
                    method="provider web search",
                    allowed_domains=", ".join(domains),
                    max_uses=str(p.max_lookups),
                )
                if not domains:
                    details["skipped"] = "the collection has no allowed domain"
                    return done(LiveDocsOutcome())
                return done(LiveDocsOutcome(search=WebSearch(domains, p.max_lookups)))
            result = await self._client.lookup_live(
                inp.collection,
                inp.query,
                max_lookups=p.max_lookups,
                limit=p.sections,
                timeout_s=p.timeout_s,
            )
        except GroundwireError as error:
            details["skipped"] = f"the lookup failed: {error.message}"
            return done(
                LiveDocsOutcome(), fallback=True, reason=error.message, dep=error.dependency or ""
            )
        fetched = [f for f in result.fetches if f.outcome == "fetched"]
        refused = [f for f in result.fetches if f.outcome != "fetched"]
        details.update(
            method="built-in",
            lookups=str(result.lookups),
            allowed_domains=", ".join(result.allowed_domains),
            pages_fetched=str(len(fetched)),
            fetched=", ".join(f.url for f in fetched),
            sections=str(len(result.candidates)),
        )
        if refused:
            details["refused"] = "; ".join(
                f"{f.url or 'lookup'}: {f.outcome}: {f.reason}" for f in refused
            )
        if not result.candidates:
            details["skipped"] = "no live page had a section to answer from"
        return done(LiveDocsOutcome(candidates=result.candidates))
