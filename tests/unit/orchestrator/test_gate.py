"""Verify before show (stages.gate): sentences held until complete and checked, the
failing ones never sent, uncited statements withheld, code blocks held whole, and the
text sent is exactly the final answer the spans refer to; in the pipeline, an LLM
failing after a checked sentence was shown resets, and the extractive answer is checked
in turn. The verifier is the LLM judge over a scripted fast model that judges by
keyword."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from groundwire_core.errors import Unavailable
from groundwire_orchestrator.domain import (
    AnswerDelta,
    AnswerDone,
    AnswerReset,
    AskEvent,
    CitationsDone,
    NumberedSource,
    Turn,
    Verification,
)
from groundwire_orchestrator.llm.base import LLMRequest
from groundwire_orchestrator.pipeline import AskInput, ChainConfig, Pipeline
from groundwire_orchestrator.stages.analysis import FilterableFields, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import GroundedAnswerStage
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage
from groundwire_orchestrator.stages.gate import ALL_WITHHELD, VerifyBeforeShow
from groundwire_orchestrator.stages.listwise import ListwiseRerankStage
from groundwire_orchestrator.stages.rerank import RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage
from groundwire_orchestrator.text.passages import PassageVectors
from groundwire_orchestrator.verification.chain import VerifierChain
from groundwire_orchestrator.verification.judge import LlmJudge
from groundwire_orchestrator.verification.similarity import SimilarityVerifier
from tests.unit.orchestrator.doubles import (
    FakeEmbedder,
    FakeRetriever,
    Scripted,
    ScriptedLLM,
    chunk,
)

PASSAGE = "E. coli grows at 37 degrees. It divides every twenty minutes in broth."
SOURCES = {1: NumberedSource(1, chunk(1, PASSAGE))}


def _verdicts(request: LLMRequest) -> str:
    """Contradicted when the claim says "forty", not addressed by a passage that says
    "Bogus", supported otherwise."""
    content = request.messages[0].content
    passages = dict(re.findall(r'<passage id="(P\d+)">\n(.*?)\n</passage>', content, re.DOTALL))
    claims = re.findall(
        r'<claim number="(\d+)" passage="(P\d+)">(.*?)</claim>', content, re.DOTALL
    )
    verdicts = []
    for n, passage, text in claims:
        verdict = "supported"
        if "forty" in text:
            verdict = "contradicted"
        elif "Bogus" in passages[passage]:
            verdict = "not_addressed"
        evidence = "It divides every twenty minutes in broth."
        verdicts.append({"claim": int(n), "verdict": verdict, "evidence": evidence})
    return json.dumps({"verdicts": verdicts})


def _gate(
    sources: dict[int, NumberedSource] = SOURCES, *, judge_ready: bool = True
) -> tuple[VerifyBeforeShow, ScriptedLLM]:
    llm = ScriptedLLM(default_fast=_verdicts)

    async def ready() -> bool:
        return judge_ready

    chain = VerifierChain([
        LlmJudge(llm, timeout_s=2.0),
        SimilarityVerifier(PassageVectors(FakeEmbedder()), threshold=0.5),
    ], ready={"llm": ready})
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5, chain=chain)
    return VerifyBeforeShow(verifier, sources.get), llm


async def _run(gate: VerifyBeforeShow, pieces: list[str]) -> list[list[str]]:
    """What each piece released (the last entry: what finish released)."""
    out = []
    for piece in pieces:
        out.append([e.text for e in await gate.pass_event(AnswerDelta(piece))
                    if isinstance(e, AnswerDelta)])
    out.append([e.text for e in await gate.finish() if isinstance(e, AnswerDelta)])
    return out


async def test_a_sentence_is_sent_once_complete_and_a_contradicted_one_never() -> None:
    gate, llm = _gate()
    released = await _run(gate, [
        "E. ", "coli grows at 37 degrees. ", "[1]", " It divides every forty minutes [1]. ",
        "It divides every twenty minutes [1].",
    ])
    # "E." is no sentence end; the marker after the full stop waited for its sentence
    assert released[:3] == [[], [], []]
    assert released[3] == ["E. coli grows at 37 degrees. [1]"]
    assert released[4] == []
    assert released[5] == [" It divides every twenty minutes [1]."]
    sent = "".join(t for r in released for t in r)
    assert "forty" not in sent and gate.text == sent
    [withheld] = gate.withheld
    assert (withheld.status, withheld.numbers) == (Verification.CONTRADICTED, (1,))
    for c in gate.citations:
        assert c.answer_span is not None and sent[slice(*c.answer_span)] == c.sentence
        assert c.source_span is not None
        assert SOURCES[1].candidate.text[slice(*c.source_span)] == (
            "It divides every twenty minutes in broth.")
    report = gate.report()
    assert report.details["withheld"] == "1" and report.details["method_llm"] == "2"
    assert len(llm.requests) == 3


async def test_the_fallback_counts_the_citations_of_every_batch() -> None:
    gate, llm = _gate(judge_ready=False)
    await _run(gate, [
        "E. coli grows at 37 degrees [1]. ", "It divides every twenty minutes [1]. ",
        "It grows at 37 degrees [1].",
    ])
    report = gate.report()
    assert report.details["batches"] == "3"
    assert report.fallback and report.reason == (
        "llm could not judge 3 citation(s) (llm: not ready): similarity used")
    assert llm.requests == []


async def test_uncited_statements_are_withheld_and_connectives_pass() -> None:
    gate, _ = _gate()
    released = await _run(gate, [
        "Here is what the sources say:\n",
        "Bacteria are the most successful organisms on the planet by far.\n",
        "E. coli grows at 37 degrees [1].",
    ])
    sent = "".join(t for r in released for t in r)
    assert sent == "Here is what the sources say:\nE. coli grows at 37 degrees [1]."
    [withheld] = gate.withheld
    assert withheld.numbers == () and withheld.reason == "cites no source"


async def test_an_open_code_block_is_held_whole_and_checked_as_one_claim() -> None:
    gate, llm = _gate()
    released = await _run(gate, [
        "Run it [1].\n```bash\n", "make grow. now\n", "```\n", "[1]\n", "Done [1].",
    ])
    assert released[0] == ["Run it [1]."], "an opened fence ends the sentence before it"
    assert released[1] == released[2] == released[3] == []
    assert released[4] == ["\n```bash\nmake grow. now\n```\n[1]"]
    assert gate.text.endswith("```\n[1]\nDone [1].")
    blocks = [r.messages[0].content for r in llm.requests if "```bash" in r.messages[0].content]
    assert len(blocks) == 1 and "make grow. now" in blocks[0]


async def test_every_cited_sentence_withheld_makes_a_decline_after_a_reset() -> None:
    gate, _ = _gate()
    await gate.pass_event(AnswerDelta("In short: "))
    events = await gate.pass_event(AnswerDelta("yes. It divides every forty minutes [1]. "))
    assert [e.text for e in events if isinstance(e, AnswerDelta)] == ["In short: yes."]
    events = await gate.finish()
    assert isinstance(events[0], AnswerReset)
    assert [e.text for e in events if isinstance(e, AnswerDelta)] == [ALL_WITHHELD]
    assert gate.declined and gate.text == ALL_WITHHELD and gate.citations == ()


async def test_mixed_support_is_shown_and_a_reset_starts_over() -> None:
    gate, _ = _gate({1: SOURCES[1], 2: NumberedSource(2, chunk(2, "Bogus text."))})
    await gate.pass_event(AnswerDelta("Gone soon [1]. Next"))
    assert gate.text == "Gone soon [1]."
    await gate.pass_event(AnswerReset("the agent searched again"))
    assert gate.text == "" and gate.citations == ()
    await gate.pass_event(AnswerDelta("It divides fast, bogus or not [1][2]."))
    await gate.finish()
    statuses = sorted(c.status.value for c in gate.citations)
    assert statuses == ["supported", "unsupported"] and gate.withheld == ()


# ------------------------------------------------------------- in the pipeline


def _pipeline(llm: ScriptedLLM) -> Pipeline:
    embedder = FakeEmbedder()
    retriever = FakeRetriever([
        chunk(1, "Rate limits are enforced per API key. Each key may send sixty requests "
              "per minute before the gateway answers with status 429.", title="Rate limits"),
        chunk(2, "Boil the spaghetti in salted water for nine minutes.", title="Pasta"),
    ])
    chain = VerifierChain([
        LlmJudge(llm, timeout_s=2.0),
        SimilarityVerifier(PassageVectors(embedder), threshold=0.3),
    ])
    return Pipeline(
        analysis=QueryAnalysisStage(llm, FilterableFields(retriever), timeout_s=1.0),
        retrieval=RetrievalStage(embedder, retriever, RetrievalParams(dense_floor=0.05)),
        rerank=RerankStage(None, candidates=50, keep=20, threshold=0.5, timeout_s=1.0),
        screening=ScreeningStage(),
        listwise=ListwiseRerankStage(llm, top_k=10, timeout_s=1.0),
        answer=GroundedAnswerStage(
            llm, timeout_s=5, max_tokens=400, context_tokens=3000, history_tokens=500
        ),
        extractive=ExtractiveAnswerStage(embedder, min_score=0.0),
        verifier=CitationVerifier(embedder, threshold=0.3, chain=chain),
        reader=SourceReader(embedder, retriever, max_chunks=50),
        config=ChainConfig(answer_sources=5, verify_before_show="auto"),
    )


def _answer(*pieces: str, fail_after: int | None = None) -> Callable[[LLMRequest], Scripted]:
    def reply(request: LLMRequest) -> Scripted:
        prompt = request.messages[-1].content
        assert isinstance(prompt, str)
        n = next(
            m.group(1)
            for m in re.finditer(r'<excerpt n="(\d+)">(.*?)</excerpt>', prompt, re.DOTALL)
            if "sixty requests" in m.group(2)
        )
        error = Unavailable("gone", dependency="llm:fake") if fail_after is not None else None
        return Scripted([p.format(n=n) for p in pieces], error=error, error_after=fail_after)
    return reply


async def _ask(llm: ScriptedLLM) -> list[AskEvent]:
    inp = AskInput("docs", [Turn("user", "how many requests may one API key send?")])
    return [e async for e in _pipeline(llm).ask(inp)]


async def test_in_the_pipeline_the_client_gets_only_checked_sentences() -> None:
    llm = ScriptedLLM(default_fast=_verdicts, strong=[_answer(
        "Rate limits are enforced ", "per API key [{n}]. ", "Each key may send ",
        "forty requests per minute [{n}].",
    )])
    events = await _ask(llm)
    deltas = [e.text for e in events if isinstance(e, AnswerDelta)]
    done = events[-1]
    assert isinstance(done, AnswerDone) and done.mode == "generated"
    assert "".join(deltas) == done.answer and "forty" not in done.answer
    [cited] = [e for e in events if isinstance(e, CitationsDone)]
    assert [w.status for w in cited.withheld] == [Verification.CONTRADICTED]
    assert [c.method for c in cited.citations] == ["llm"]


async def test_a_failed_llm_after_shown_text_resets_and_the_extractive_answer_is_checked(
) -> None:
    llm = ScriptedLLM(default_fast=_verdicts, strong=[_answer(
        "Rate limits are enforced ", "per API key [{n}]. ", "Each key ", "may", fail_after=3,
    )])
    events = await _ask(llm)
    kinds = [type(e).__name__ for e in events]
    reset = kinds.index("AnswerReset")
    shown_before = [e.text for e in events[:reset] if isinstance(e, AnswerDelta)]
    assert shown_before == ["Rate limits are enforced per API key [1]."]
    after = [e.text for e in events[reset:] if isinstance(e, AnswerDelta)]
    done = events[-1]
    assert isinstance(done, AnswerDone) and done.mode == "extractive"
    assert "".join(after) == done.answer and "Rate limits" in done.answer
    [cited] = [e for e in events if isinstance(e, CitationsDone)]
    assert cited.citations and all(c.answer_span for c in cited.citations)
    for c in cited.citations:
        assert c.answer_span is not None and done.answer[slice(*c.answer_span)] == c.sentence
