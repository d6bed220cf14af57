"""Orchestrator settings: environment variables prefixed GROUNDWIRE_ORCHESTRATOR_."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from groundwire_core.settings import ServiceSettings
from groundwire_orchestrator.fusion import (
    DEFAULT,
    METHODS,
    FusionChoice,
    check_method,
    format_weights,
    parse_weights,
)
from groundwire_orchestrator.llm import factory
from groundwire_orchestrator.verification.chain import parse_order


class OrchestratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_prefix="GROUNDWIRE_ORCHESTRATOR_"
    )

    port: int = Field(50054, ge=0, le=65535, description="gRPC port; 0 picks a free one.")
    embedder_addr: str = Field("127.0.0.1:50051", description="gRPC address of the embedder.")
    retriever_addr: str = Field("127.0.0.1:50053", description="gRPC address of the retriever.")
    reranker_addr: str | None = Field(
        "127.0.0.1:50052", description="gRPC address of the reranker; empty disables reranking."
    )
    call_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Upper bound of one call to a dependency (the caller's deadline wins).",
    )
    embedder_query_timeout_s: float = Field(
        2.0,
        gt=0,
        description="Deadline of one query embedding (retrieval, the extractive answer's "
        "question, the agent's reads): a query embeds in milliseconds, so with a frozen "
        "embedder the search falls back to BM25 after this, not after CALL_TIMEOUT_S. "
        "Passage batches keep CALL_TIMEOUT_S.",
    )
    embedder_retry_after_s: float = Field(
        5.0,
        gt=0,
        description="After the embedder failed a call (down, past its deadline, overloaded), "
        "how long it is not asked again: searches run BM25 alone, the extractive answer "
        "scores by word overlap and the similarity citation check reports UNCHECKED at once, "
        "instead of every request waiting on the deadline again. A restarted embedder is "
        "used again after at most this long.",
    )
    ask_max_bytes: int = Field(
        262_144,
        ge=4096,
        description="Most bytes (UTF-8) of one Ask's messages and instructions together; a "
        "larger Ask is rejected (INVALID_ARGUMENT) before any work. The gateway's own input "
        "budget is far smaller; this bounds direct gRPC callers.",
    )

    # --- retrieval and rerank
    rerank_timeout_s: float = Field(
        2.0, gt=0, description="Hard limit of one Rerank call; past it the fused order is used."
    )
    rerank_budget_ms: float = Field(
        1500.0,
        ge=0,
        description="Latency budget of the rerank stage: with the reranker's queue depth and "
        "ms/passage (its Info), fewer candidates are scored, or none, to stay within it. "
        "0 = no budget.",
    )
    rerank_min_candidates: int = Field(
        5, ge=1, description="Below this many candidates within budget, rerank is skipped."
    )
    reranker_info_ttl_s: float = Field(
        1.0, gt=0, description="How long the reranker's Info (load) is cached."
    )
    candidates: int = Field(50, ge=1, le=500, description="Fused candidates passed to rerank.")
    rerank_keep: int = Field(20, ge=1, description="Results kept after rerank.")
    rerank_threshold: float = Field(0.5, ge=0, le=1, description="Reranker score floor.")
    dense_floor: float = Field(0.3, ge=-1, le=1, description="Cosine floor on the dense path.")
    rrf_k: int = Field(60, ge=1, description="RRF constant k.")
    path_limit: int = Field(100, ge=1, description="Candidates per retrieval path.")
    late_interaction: Literal["off", "when_no_rerank", "always"] = Field(
        "off",
        description="MaxSim rescoring of the fused candidates with the query's and the stored "
        "ColBERT vectors (models that have them, e.g. BGE-M3; elsewhere skipped, reported), "
        "in the retriever's search, before the cross-encoder. when_no_rerank: only for "
        "searches that will not rerank (rerank off in the request, no reranker configured, or "
        "the reranker down or past RERANK_BUDGET_MS by its cached load).",
    )
    late_interaction_depth: int = Field(
        50, ge=1, le=1000, description="Fused candidates the late interaction rescores."
    )
    fusion: str = Field(
        DEFAULT.method,
        description="How retrieval merges the paths' rankings, a method of the retriever's "
        f"Fusion enum: {', '.join(METHODS)}. Weighted with FUSION_WEIGHTS scored best on SciFact "
        "(dev nDCG@10 0.754, RRF 0.729; evals/README.md). A search may ask for another "
        "(`fusion` in /v1/search).",
    )
    fusion_weights: str = Field(
        format_weights(DEFAULT.weights),
        description="Per-path weights of weighted fusion, `path=weight` comma-separated (a "
        "path left out weighs 1.0; only the ratios between the paths that ran count). "
        "dense 0.4 / bm25 0.6 was tuned on SciFact's tune part with MiniLM; sparse (BGE-M3 "
        "only) is unmeasured here. A search may give its own (`fusion_weights`).",
    )

    # --- LLM providers (none configured = no LLM: extractive answers)
    anthropic_api_key: SecretStr | None = Field(
        None, description="Anthropic API key; set it to use Anthropic."
    )
    anthropic_base_url: str | None = Field(
        None, description="Anthropic API base URL (default: the SDK's)."
    )
    anthropic_fast_model: str = Field(
        factory.ANTHROPIC_FAST_MODEL, description="Anthropic model for analysis and listwise."
    )
    anthropic_strong_model: str = Field(
        factory.ANTHROPIC_STRONG_MODEL, description="Anthropic model for answers."
    )
    openai_base_url: str | None = Field(
        None,
        description="Base URL of an OpenAI-compatible endpoint (vLLM, llama.cpp, Ollama, "
        "LiteLLM), e.g. http://127.0.0.1:8000/v1; a key without it means OpenAI's own API.",
    )
    openai_api_key: SecretStr | None = Field(
        None, description="API key of the OpenAI-compatible endpoint, if it needs one."
    )
    openai_fast_model: str = Field("", description="OpenAI-compatible model for analysis.")
    openai_strong_model: str = Field(
        "", description="OpenAI-compatible model for answers (default: the fast one)."
    )
    llm_order: str = Field(
        "anthropic,openai",
        description="Failover order of the configured providers, comma-separated.",
    )
    llm_timeout_s: float = Field(
        20.0,
        gt=0,
        description="How long one provider may take to start answering before the next one "
        "in LLM_ORDER is tried.",
    )

    # --- the LLM stages
    analysis_timeout_s: float = Field(
        4.0, gt=0, description="Query analysis budget; past it the raw query is used."
    )
    listwise_top_k: int = Field(
        20, ge=2, le=100, description="Candidates the listwise stage reorders."
    )
    listwise_reasons: int = Field(
        3, ge=0, le=20, description="Top results given a match reason by the listwise stage."
    )
    listwise_timeout_s: float = Field(
        8.0, gt=0, description="Listwise rerank budget; past it the cross-encoder order is used."
    )
    answer_sources: int = Field(8, ge=1, le=50, description="Most excerpts given to the answer.")
    answer_context_tokens: int = Field(
        6000,
        ge=200,
        description="Token budget of the excerpts in the answer prompt (approximate count).",
    )
    answer_history_tokens: int = Field(
        2000, ge=0, description="Token budget of earlier conversation turns (approximate)."
    )
    answer_max_tokens: int = Field(1024, ge=16, description="Most tokens the answer may have.")
    answer_timeout_s: float = Field(
        60.0, gt=0, description="Budget of one answer call to the LLM, streaming included."
    )
    extractive_min_score: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Extractive answers quote only blocks scoring at least this "
        "(0.6 * embedder cosine + 0.2 * word overlap + 0.2 * the question's words in the "
        "block's title, heading and lead-in); with none, the chain declines "
        "instead of quoting weak matches; 0 = off. Model-dependent; 0.2 is for MiniLM.",
    )
    decline_threshold: float = Field(
        0.52,
        ge=0,
        le=1,
        description="Coverage stage without a reranker: a question whose evidence "
        "(DECLINE_DENSE_WEIGHT * best dense cosine + (1 - weight) * share of the question's "
        "words in the top DECLINE_TOP_K chunks) is under this is covered thinly: answered "
        "from the collection, and looked up live too when LIVE_DOCS is on; not a decline "
        "by itself. 0 = off, and the task rule (words held together in one chunk) with it. "
        "Chosen on evals/declines with MiniLM (see benchmarks/README.md); model-dependent.",
    )
    decline_unknown_names: bool = Field(
        True,
        description="Coverage stage without a reranker: decline when the question names "
        "something (a capitalised word, an acronym, a word with digits) that none of the "
        "top DECLINE_TOP_K chunks contains, or that they mention only in passing (in no "
        "title, heading or file name, and only in passages that are not where the rest "
        "of the question is).",
    )
    decline_dense_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="Weight of the dense cosine in the coverage evidence (chosen with "
        "DECLINE_THRESHOLD on evals/declines, MiniLM).",
    )
    decline_top_k: int = Field(
        20, ge=1, le=100, description="Top candidates the coverage evidence is taken from."
    )
    decline_rerank_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Coverage stage with a reranker: the chain declines when the best "
        "cross-encoder score is under this; 0 = off.",
    )
    decline_with_llm: bool = Field(
        False,
        description="Act on the coverage verdict when an LLM writes the answer too (by "
        "default only the extractive answer is declined by it; the LLM declines itself).",
    )
    live_docs: bool = Field(
        False,
        description="Live documentation fallback (docs/live-docs.md): when the coverage "
        "stage finds the collection short on an in-domain question, look it up on the "
        "documentation sites the collection was synced from (the retriever's LookupLive, "
        "or Anthropic's web search when Anthropic answers) and cite those pages, marked "
        "live. Out-of-scope questions are declined with no lookup.",
    )
    live_docs_max_lookups: int = Field(
        3,
        ge=1,
        le=20,
        description="Live pages fetched (or web searches, with Anthropic) at most per "
        "question; the retriever's LIVE_MAX_LOOKUPS caps it too.",
    )
    live_docs_min_evidence: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Hybrid evidence (the coverage formula, over the collection's "
        "candidates) a question needs to count as in-domain for a live lookup; a question "
        "naming something no passage contains is out of scope whatever its evidence. "
        "Not fitted (MiniLM): between off-topic questions and DECLINE_THRESHOLD.",
    )
    live_docs_sections: int = Field(
        5, ge=1, le=20, description="Live sections given to the answer at most."
    )
    live_docs_timeout_s: float = Field(
        30.0,
        gt=0,
        le=300,
        description="Seconds for a whole live lookup (the retriever's LIVE_TOTAL_TIMEOUT_S "
        "caps it too).",
    )
    live_docs_provider_search: bool = Field(
        True,
        description="When Anthropic is the first provider, let its web search tool do "
        "the live lookup (allowed domains, max_uses = LIVE_DOCS_MAX_LOOKUPS) instead of "
        "the retriever's own lookup.",
    )
    extractive_cross_encoder: bool = Field(
        True,
        description="Score the extractive answer's units with the reranker's cross-encoder "
        "when it has a model loaded (else embedder cosine + word overlap).",
    )
    citation_support_threshold: float = Field(
        0.45,
        ge=0,
        le=1,
        description="Similarity verifier: the support score (0.6 * embedder cosine + 0.4 * "
        "word overlap) a cited chunk needs for its citation to count as supported.",
    )
    citation_verifiers: str = Field(
        "nli,llm,similarity",
        description="Citation verifiers in order, comma-separated (nli: the reranker's "
        "entailment model; llm: the fast LLM as judge; similarity: the score above, never "
        "proof). Those not available (no NLI model, no LLM) are skipped; a claim a "
        "verifier cannot judge (failure, timeout, invalid reply) goes to the next.",
    )
    citation_judge_timeout_s: float = Field(
        8.0, gt=0, description="LLM judge: budget of one batch of claims; past it, the next "
        "verifier judges them.",
    )
    citation_judge_batch: int = Field(
        8, ge=1, le=50, description="LLM judge: claims per call (batches run concurrently)."
    )
    citation_nli_support_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Entailment verifier: the entailment probability (best passage window) "
        "a claim needs to be SUPPORTED.",
    )
    citation_nli_contradiction_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Entailment verifier: a claim is CONTRADICTED when a passage window's "
        "contradiction probability reaches this and exceeds the best entailment.",
    )
    citation_nli_timeout_s: float = Field(
        5.0, gt=0, description="Entailment verifier: budget of one Entail call; past it, the "
        "next verifier judges its claims.",
    )
    verify_before_show: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Hold each answer sentence until its citations are checked and withhold "
        "those that fail (listed in the citations event's `withheld`). auto: on when the "
        "first available verifier is nli or llm (similarity alone is no proof to withhold "
        "on); off: stream as written and only label citations.",
    )
    agent_steps: int = Field(
        0, ge=0, le=20, description="Default tool rounds of the agentic loop; 0 = off."
    )
    agent_steps_max: int = Field(
        4, ge=0, le=20, description="Most tool rounds a request may ask for."
    )
    agent_search_results: int = Field(
        5, ge=1, le=20, description="New excerpts one agent search adds at most."
    )
    agent_result_tokens: int = Field(
        3000, ge=200, description="Token cap of one tool result (read_document is cut to it)."
    )

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> OrchestratorSettings:
        configured = bool(self.openai_base_url) or self.openai_api_key is not None
        if configured and not (self.openai_strong_model or self.openai_fast_model):
            raise ValueError(
                "an OpenAI-compatible endpoint is configured without a model: set "
                "GROUNDWIRE_ORCHESTRATOR_OPENAI_STRONG_MODEL (or OPENAI_FAST_MODEL)"
            )
        return self

    @field_validator("fusion")
    @classmethod
    def _known_fusion(cls, value: str) -> str:
        return check_method(value)  # ValueError names the methods

    @field_validator("fusion_weights")
    @classmethod
    def _fusion_weights(cls, value: str) -> str:
        parse_weights(value)  # ValueError names the bad pair
        return value

    @property
    def fusion_choice(self) -> FusionChoice:
        """FUSION and FUSION_WEIGHTS as the retrieval stage's configured fusion."""
        return FusionChoice(self.fusion, parse_weights(self.fusion_weights))

    @field_validator("citation_verifiers")
    @classmethod
    def _known_verifiers(cls, value: str) -> str:
        parse_order(value)  # ValueError names the unknown or repeated verifier
        return value

    @field_validator("llm_order")
    @classmethod
    def _known_providers(cls, value: str) -> str:
        factory.provider_order(value)  # ValueError names the unknown or repeated provider
        return value
