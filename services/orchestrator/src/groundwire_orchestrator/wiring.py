"""The orchestrator assembled from its settings, in one place: the dependency channels
and their clients, the LLM chain (llm.factory), and every stage of the pipeline. The
server only converts and calls; nothing else builds a stage from settings."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.errors import GroundwireError
from groundwire_core.grpc.client import create_channel
from groundwire_orchestrator.clients.embedder_outage import EmbedderOutage, OutageAwareEmbedder
from groundwire_orchestrator.clients.interfaces import Embedder
from groundwire_orchestrator.clients.reranker import RerankerClient
from groundwire_orchestrator.clients.retriever import RetrieverClient
from groundwire_orchestrator.llm.base import LLMProvider
from groundwire_orchestrator.llm.factory import build_llm
from groundwire_orchestrator.llm.observed import ObservedLLM
from groundwire_orchestrator.pipeline import ChainConfig, Pipeline
from groundwire_orchestrator.settings import OrchestratorSettings
from groundwire_orchestrator.stages.analysis import FilterableFields, QueryAnalysisStage
from groundwire_orchestrator.stages.answer import GroundedAnswerStage
from groundwire_orchestrator.stages.citations import CitationVerifier
from groundwire_orchestrator.stages.coverage import CoverageParams, CoverageStage
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage
from groundwire_orchestrator.stages.listwise import ListwiseRerankStage
from groundwire_orchestrator.stages.live_docs import LiveDocsParams, LiveDocsStage
from groundwire_orchestrator.stages.rerank import RerankerLoadCache, RerankStage
from groundwire_orchestrator.stages.retrieval import RetrievalParams, RetrievalStage, SourceReader
from groundwire_orchestrator.stages.screening import ScreeningStage
from groundwire_orchestrator.text.passages import PassageVectors
from groundwire_orchestrator.verification.base import ClaimVerifier, Method
from groundwire_orchestrator.verification.chain import ReadyCheck, VerifierChain, parse_order
from groundwire_orchestrator.verification.judge import LlmJudge
from groundwire_orchestrator.verification.nli import NliThresholds, NliVerifier
from groundwire_orchestrator.verification.similarity import SimilarityVerifier

READ_DOCUMENT_MAX_CHUNKS = 200


def _info_cache(settings: OrchestratorSettings, reranker: RerankerClient) -> RerankerLoadCache:
    """The reranker's Info, re-read every RERANKER_INFO_TTL_S."""
    timeout_s = min(settings.rerank_timeout_s, 1.0)
    return RerankerLoadCache(reranker, ttl_s=settings.reranker_info_ttl_s, timeout_s=timeout_s)


def entailment_ready(info: RerankerLoadCache) -> ReadyCheck:
    """Whether the reranker serves an NLI model now (its cached Info, probed within the
    cache's own timeout; False when it is down)."""

    async def probe() -> bool:
        try:
            return (await info.get()).entailment_ready
        except GroundwireError:
            return False

    return probe


def build_verifiers(
    settings: OrchestratorSettings,
    *,
    llm: LLMProvider | None,
    passages: PassageVectors,
    reranker: RerankerClient | None = None,
    info: RerankerLoadCache | None = None,
) -> VerifierChain:
    """The citation verifiers in CITATION_VERIFIERS order, those not configured left
    out (no reranker, no LLM); the NLI verifier is skipped while the reranker serves no
    NLI model (``info``: the reranker's Info cache shared with the rerank stage; one of
    its own when None)."""
    s = settings
    available: dict[str, ClaimVerifier | None] = {
        "nli": NliVerifier(
            reranker,
            thresholds=NliThresholds(
                s.citation_nli_support_threshold, s.citation_nli_contradiction_threshold
            ),
            timeout_s=s.citation_nli_timeout_s,
        )
        if reranker is not None
        else None,
        "llm": LlmJudge(
            llm, timeout_s=s.citation_judge_timeout_s, batch_size=s.citation_judge_batch
        )
        if llm is not None
        else None,
        "similarity": SimilarityVerifier(passages, threshold=s.citation_support_threshold),
    }
    ready: dict[Method, ReadyCheck] = {}
    if reranker is not None:
        # the Info the rerank stage reads (one probe per TTL, failures cached too, so a
        # hung reranker holds at most one answer's check, for at most its timeout)
        info = info or _info_cache(s, reranker)
        ready["nli"] = entailment_ready(info)
    return VerifierChain(
        [v for m in parse_order(s.citation_verifiers) if (v := available[m]) is not None],
        ready,
    )


def build_pipeline(
    settings: OrchestratorSettings,
    *,
    embedder: Embedder,
    retriever: RetrieverClient,
    reranker: RerankerClient | None,
    llm: LLMProvider | None,
    query_embedder: Embedder | None = None,
) -> Pipeline:
    """Every stage configured from ``settings``; opens nothing. ``query_embedder``
    embeds queries (``embedder`` when None; passages always go to ``embedder``)."""
    s = settings
    query = query_embedder or embedder
    passages = PassageVectors(embedder)  # chunk-text vectors, shared by two stages
    # the reranker's Info, read by three: one probe per TTL, not one each
    info = _info_cache(s, reranker) if reranker is not None else None
    verifier = CitationVerifier(
        embedder,
        threshold=s.citation_support_threshold,
        passages=passages,
        chain=build_verifiers(s, llm=llm, passages=passages, reranker=reranker, info=info),
    )
    answer = (
        GroundedAnswerStage(
            llm,
            timeout_s=s.answer_timeout_s,
            max_tokens=s.answer_max_tokens,
            context_tokens=s.answer_context_tokens,
            history_tokens=s.answer_history_tokens,
        )
        if llm is not None
        else None
    )
    rerank = RerankStage(
        reranker,
        candidates=s.candidates,
        keep=s.rerank_keep,
        threshold=s.rerank_threshold,
        timeout_s=s.rerank_timeout_s,
        budget_ms=s.rerank_budget_ms,
        min_candidates=s.rerank_min_candidates,
        load=info,
    )
    return Pipeline(
        analysis=QueryAnalysisStage(
            llm, FilterableFields(retriever), timeout_s=s.analysis_timeout_s
        ),
        retrieval=RetrievalStage(
            query,
            retriever,
            RetrievalParams(
                path_limit=s.path_limit,
                rrf_k=s.rrf_k,
                dense_floor=s.dense_floor,
                fusion=s.fusion_choice,
                late_interaction=s.late_interaction,
                late_interaction_depth=s.late_interaction_depth,
                reranker_configured=reranker is not None,
                rerank_will_skip=rerank.will_skip,
            ),
        ),
        rerank=rerank,
        screening=ScreeningStage(),
        listwise=ListwiseRerankStage(
            llm, top_k=s.listwise_top_k, timeout_s=s.listwise_timeout_s
        ),
        answer=answer,
        extractive=ExtractiveAnswerStage(
            query,
            min_score=s.extractive_min_score,
            passages=passages,
            reranker=reranker if s.extractive_cross_encoder else None,
            rerank_timeout_s=s.rerank_timeout_s,
            load=info,
        ),
        verifier=verifier,
        reader=SourceReader(query, retriever, max_chunks=READ_DOCUMENT_MAX_CHUNKS),
        coverage=CoverageStage(
            CoverageParams(
                threshold=s.decline_threshold,
                rerank_threshold=s.decline_rerank_threshold,
                dense_weight=s.decline_dense_weight,
                top_k=s.decline_top_k,
                names=s.decline_unknown_names,
                with_llm=s.decline_with_llm,
            )
        ),
        live_docs=LiveDocsStage(
            retriever,
            LiveDocsParams(
                max_lookups=s.live_docs_max_lookups,
                min_evidence=s.live_docs_min_evidence,
                dense_weight=s.decline_dense_weight,
                top_k=s.decline_top_k,
                sections=s.live_docs_sections,
                timeout_s=s.live_docs_timeout_s,
                provider_search=s.live_docs_provider_search and _anthropic_first(llm),
            ),
        )
        if s.live_docs
        else None,
        config=ChainConfig(
            candidates=s.candidates,
            rerank_keep=s.rerank_keep,
            answer_sources=s.answer_sources,
            context_tokens=s.answer_context_tokens,
            default_agent_steps=s.agent_steps,
            max_agent_steps=s.agent_steps_max,
            search_tool_results=s.agent_search_results,
            tool_result_tokens=s.agent_result_tokens,
            listwise_reasons=s.listwise_reasons,
            verify_before_show=s.verify_before_show,
        ),
    )


def _anthropic_first(llm: LLMProvider | None) -> bool:
    """Whether Anthropic answers first (its web search can do a live lookup)."""
    if llm is None:
        return False
    names = llm.names if isinstance(llm, ObservedLLM) else (llm.name,)
    return bool(names) and names[0] == "anthropic"


@dataclass
class Assembly:
    """What :func:`assemble` built: the pipeline, the observed LLM (None: extractive
    answers) and the open channels by dependency name, closed by :meth:`aclose`."""

    pipeline: Pipeline
    llm: ObservedLLM | None
    channels: dict[str, grpc.aio.Channel]

    async def aclose(self) -> None:
        await asyncio.gather(*(c.close() for c in self.channels.values()))
        if self.llm is not None:
            await self.llm.aclose()


async def assemble(
    settings: OrchestratorSettings, *, llm: LLMProvider | None = None
) -> Assembly:
    """Opens the dependency channels and builds the LLM chain and the pipeline from
    ``settings``; the LLM's SDK set-up is paid here, before the service says SERVING
    (it must not eat a request's deadline). ``llm`` replaces the providers the
    settings describe (tests inject one). Raises ValueError for an LLM configuration
    the settings could not reject alone."""
    s = settings
    observed = ObservedLLM(llm, (llm.name,)) if llm is not None else build_llm(s)
    if observed is not None:
        await observed.warm_up()
    channels = {
        "embedder": create_channel(s.embedder_addr),
        "retriever": create_channel(s.retriever_addr),
    }
    if s.reranker_addr:
        channels["reranker"] = create_channel(s.reranker_addr)
    # one outage for both clients: a failed query embedding spares the citation
    # check's passage batch its wait, and the other way round
    outage = EmbedderOutage(s.embedder_retry_after_s)
    pipeline = build_pipeline(
        s,
        embedder=OutageAwareEmbedder(
            EmbedderClient(channels["embedder"], timeout_s=s.call_timeout_s), outage
        ),
        query_embedder=OutageAwareEmbedder(
            EmbedderClient(
                channels["embedder"], timeout_s=min(s.embedder_query_timeout_s, s.call_timeout_s)
            ),
            outage,
        ),
        retriever=RetrieverClient(channels["retriever"], timeout_s=s.call_timeout_s),
        reranker=RerankerClient(channels["reranker"]) if "reranker" in channels else None,
        llm=observed,
    )
    return Assembly(pipeline, observed, channels)
