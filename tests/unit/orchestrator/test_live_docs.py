"""The live_docs stage alone, with a fake lookup client: it looks up only an uncovered
in-domain question, reports what the lookup did, offers the provider's web search
instead when the provider has one, and never raises."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.domain import Candidate, LiveFetchReport, LiveLookupResult
from groundwire_orchestrator.llm.base import WebSearch
from groundwire_orchestrator.stages.coverage import Coverage
from groundwire_orchestrator.stages.live_docs import LiveDocsInput, LiveDocsParams, LiveDocsStage
from tests.unit.orchestrator.doubles import chunk

COLLECTED = (
    replace(
        chunk(1, "Ferry copies folders into a vault; ferry.toml sets the vault folder."),
        path_scores=(("dense", 0.5),),
    ),
)
LIVE = replace(chunk(9, "Run ferry keys rotate --vault NAME."), live=True, fetched_at=1.0)
NOT_COVERED = Coverage(False, "hybrid", 0.42, 0.52)


@dataclass
class FakeLookup:
    result: LiveLookupResult | Exception = field(
        default_factory=lambda: LiveLookupResult(
            (LIVE,),
            (
                LiveFetchReport("https://d.test/keys.html", "fetched"),
                LiveFetchReport("https://d.test/full.html", "refused", "over the limit"),
            ),
            2,
            ("d.test",),
        )
    )
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def lookup_live(
        self, collection: str, query: str, *, max_lookups: int, limit: int, timeout_s: float
    ) -> LiveLookupResult:
        self.calls.append({"query": query, "max_lookups": max_lookups, "limit": limit})
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    async def allowed_domains(self, collection: str) -> tuple[str, ...]:
        self.calls.append({"domains": collection})
        return ("d.test",)


def _input(query: str, coverage: Coverage = NOT_COVERED) -> LiveDocsInput:
    candidates: tuple[Candidate, ...] = COLLECTED
    return LiveDocsInput("docs", query, coverage, candidates)


async def test_an_uncovered_in_domain_question_is_looked_up() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams(max_lookups=3, min_evidence=0.2))
    outcome, report = await stage.run(_input("how do I rotate the keys of a ferry vault"))
    assert outcome.candidates == (LIVE,) and outcome.search is None
    assert lookup.calls == [
        {"query": "how do I rotate the keys of a ferry vault", "max_lookups": 3, "limit": 5}
    ]
    assert report.name == "live_docs" and not report.fallback
    assert report.details["lookups"] == "2"
    assert report.details["pages_fetched"] == "1"
    assert report.details["refused"] == "https://d.test/full.html: refused: over the limit"


async def test_a_covered_question_is_not_looked_up() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams())
    covered = Coverage(True, "hybrid", 0.8, 0.52)
    outcome, report = await stage.run(_input("ferry vault folder", covered))
    assert outcome.candidates == () and lookup.calls == []
    assert report.details["skipped"] == "the collection covers the question"


async def test_a_thinly_covered_in_domain_question_is_looked_up_too() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams(max_lookups=3, min_evidence=0.2))
    thin = Coverage(True, "hybrid", 0.42, 0.52, thin=True)
    outcome, report = await stage.run(_input("how do I rotate the keys of a ferry vault", thin))
    assert outcome.candidates == (LIVE,) and len(lookup.calls) == 1
    assert "skipped" not in report.details and report.details["lookups"] == "2"


async def test_a_question_naming_another_product_is_out_of_scope() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams(min_evidence=0.0))
    outcome, report = await stage.run(_input("how do I rotate the keys of a Kubernetes vault"))
    assert outcome.candidates == () and lookup.calls == []
    assert report.details["lookups"] == "0"
    assert "names Kubernetes" in report.details["skipped"]


async def test_a_question_naming_a_product_mentioned_only_in_passing_is_out_of_scope() -> None:
    aside = replace(
        chunk(2, "Unlike Syncthing, ferry keeps every version."), path_scores=(("dense", 0.5),)
    )
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams(min_evidence=0.0))
    outcome, report = await stage.run(LiveDocsInput(
        "docs", "how do I copy folders with Syncthing", NOT_COVERED, (*COLLECTED, aside)
    ))
    assert outcome.candidates == () and lookup.calls == []
    assert report.details["skipped"] == (
        "out of scope: the question names Syncthing, which the collection mentions only in "
        "passing"
    )


async def test_weak_evidence_is_out_of_scope() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(lookup, LiveDocsParams(min_evidence=0.9))
    _, report = await stage.run(_input("which wine goes with salmon"))
    assert lookup.calls == []
    assert report.details["skipped"].startswith("out of scope: hybrid evidence")


async def test_a_failed_lookup_is_a_reported_fallback() -> None:
    lookup = FakeLookup(result=Unavailable("the retriever is down", dependency="retriever"))
    stage = LiveDocsStage(lookup, LiveDocsParams(min_evidence=0.2))
    outcome, report = await stage.run(_input("how do I rotate the keys of a ferry vault"))
    assert outcome.candidates == ()
    assert report.fallback and report.dependency == "retriever"
    assert report.details["skipped"] == "the lookup failed: the retriever is down"


async def test_a_provider_with_web_search_gets_the_domains_and_max_uses() -> None:
    lookup = FakeLookup()
    stage = LiveDocsStage(
        lookup, LiveDocsParams(max_lookups=2, min_evidence=0.2, provider_search=True)
    )
    outcome, report = await stage.run(_input("how do I rotate the keys of a ferry vault"))
    assert outcome.search == WebSearch(("d.test",), 2) and outcome.candidates == ()
    assert lookup.calls == [{"domains": "docs"}], "no page fetched by Groundwire"
    assert report.details["method"] == "provider web search"
    assert report.details["max_uses"] == "2"


def test_the_anthropic_request_carries_web_search_only_when_offered() -> None:
    from groundwire_orchestrator.llm.anthropic import request_params
    from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest

    plain = LLMRequest(system="s", messages=(ChatMessage("user", "q"),))
    assert "tools" not in request_params(plain, "m", tools=True)
    offered = replace(plain, web_search=WebSearch(("docs.example.com",), 3))
    params = request_params(offered, "m", tools=True)
    assert params["tools"] == [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "allowed_domains": ["docs.example.com"],
            "max_uses": 3,
        }
    ]
    assert "tools" not in request_params(offered, "m", tools=False), "not on complete()"
