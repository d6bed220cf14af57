"""The services side of `groundwire eval grounding`: start the embedder (and the
reranker when an NLI model is there) as the local cluster does, build each verifier
as the orchestrator builds it (its classes, its settings as `groundwire up` would pass
them), and judge every case with each.

The verifiers are the orchestrator's own (groundwire_orchestrator.verification), so
the figures are the product's; this command therefore needs the orchestrator package
installed beside the CLI, as `groundwire up` does.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundwire_cli import config
from groundwire_cli.cluster import LocalCluster
from groundwire_cli.evaluation.beir import EvaluationError
from groundwire_cli.evaluation.grounding import Case, MethodResult
from groundwire_cli.evaluation.run import resolve_model
from groundwire_cli.progress import progress
from groundwire_core.clients.embedder import EmbedderClient
from groundwire_core.grpc.client import create_channel

NLI_VARIABLE = "GROUNDWIRE_RERANKER_NLI_MODEL_DIR"
# Claims per judge() call: the similarity verifier embeds each call's claims and
# passage sentences in one go; an NLI call sends up to 16 windows a claim.
BATCH = {"similarity": 64, "nli": 8, "llm": 32}
# A batch of an offline evaluation may wait for the whole queue; the product's
# per-answer budgets (seconds) are for a reader waiting.
EVAL_TIMEOUT_S = 300.0


def judge_all(
    cases: Sequence[Case], *, model_dir: Path, nli_model: Path | None
) -> list[MethodResult]:
    """Every method's judgements of ``cases``, in the order similarity, nli, llm.

    Raises EvaluationError (no embedder model and no way to build one; the orchestrator
    package missing), ClusterError (a service did not start).
    """
    resolve_model(model_dir)
    settings_class = config.settings_class("orchestrator")
    if settings_class is None:
        raise EvaluationError(
            "the grounding evaluation runs the orchestrator's verifiers: install it "
            "(pip install -c constraints.txt -e services/orchestrator)"
        )
    with tempfile.TemporaryDirectory(prefix="groundwire-grounding-") as tmp:
        run_dir, store = Path(tmp) / "run", Path(tmp) / "qdrant"
        extra = {NLI_VARIABLE: str(nli_model)} if nli_model is not None else {}
        cluster = LocalCluster.with_free_ports(run_dir, model_dir, store, extra_env=extra)
        nli_dir = nli_model or cluster.built_nli_model()
        orchestrator = config._instance("orchestrator", settings_class, cluster)
        names = ("embedder",) + (("reranker",) if nli_dir is not None else ())
        with cluster:
            print(f"starting {', '.join(names)}…", file=sys.stderr, flush=True)
            cluster.start(names)
            cluster.wait_ready(names=names)
            return asyncio.run(_judge_async(cluster, cases, orchestrator, nli_dir is not None))


async def _judge_async(
    cluster: LocalCluster, cases: Sequence[Case], s: Any, with_reranker: bool
) -> list[MethodResult]:
    from groundwire_orchestrator.clients.reranker import RerankerClient
    from groundwire_orchestrator.llm.factory import build_llm
    from groundwire_orchestrator.text.passages import PassageVectors
    from groundwire_orchestrator.verification.judge import LlmJudge
    from groundwire_orchestrator.verification.nli import NliThresholds, NliVerifier
    from groundwire_orchestrator.verification.similarity import SimilarityVerifier

    embedder_channel = create_channel(cluster.addr("embedder"))
    reranker_channel = create_channel(cluster.addr("reranker")) if with_reranker else None
    llm = build_llm(s)
    try:
        embedder = EmbedderClient(embedder_channel, timeout_s=EVAL_TIMEOUT_S)
        similarity = SimilarityVerifier(
            PassageVectors(embedder), threshold=s.citation_support_threshold
        )
        results = [
            await _run(
                "similarity", similarity, cases, {"threshold": s.citation_support_threshold}
            )
        ]

        skipped = (
            "no NLI model: pass --nli-model DIR, or build one with "
            "`groundwire models build nli --source DIR`"
        )
        if reranker_channel is not None:
            client = RerankerClient(reranker_channel)
            load = await client.load(timeout_s=30)
            if load.entailment_ready:
                thresholds = NliThresholds(
                    support=s.citation_nli_support_threshold,
                    contradiction=s.citation_nli_contradiction_threshold,
                )
                nli = NliVerifier(
                    client,
                    thresholds=thresholds,
                    timeout_s=EVAL_TIMEOUT_S,
                    max_tokens=load.entailment_max_tokens,
                    batch_pairs=load.max_batch_passages,
                )
                used = {
                    "support_threshold": thresholds.support,
                    "contradiction_threshold": thresholds.contradiction,
                    "max_tokens": load.entailment_max_tokens,
                }
                results.append(await _run("nli", nli, cases, used))
                skipped = ""
            else:
                skipped = "the reranker has no NLI model loaded"
        if skipped:
            results.append(MethodResult("nli", [], [], {}, 0.0, skipped=skipped))

        if llm is None:
            why = "no LLM is configured in the orchestrator's settings"
            results.append(MethodResult("llm", [], [], {}, 0.0, skipped=why))
        else:
            judge = LlmJudge(
                llm, timeout_s=s.citation_judge_timeout_s, batch_size=s.citation_judge_batch
            )
            used = {"timeout_s": s.citation_judge_timeout_s, "batch": s.citation_judge_batch}
            results.append(await _run("llm", judge, cases, used))
        return results
    finally:
        if llm is not None:
            await llm.aclose()
        for channel in (embedder_channel, reranker_channel):
            if channel is not None:
                await channel.close()


async def _run(
    method: str, verifier: Any, cases: Sequence[Case], settings: dict[str, Any]
) -> MethodResult:
    """Judges the cases in batches; a judgement's status and support per case."""
    from groundwire_orchestrator.verification.base import Claim

    statuses: list[str] = []
    supports: list[float] = []
    started = time.perf_counter()
    size = BATCH[method]
    with progress(total=len(cases), desc=method, unit="claim") as bar:
        for at in range(0, len(cases), size):
            batch = cases[at : at + size]
            judged = await verifier.judge([Claim(c.claim, c.passage) for c in batch])
            statuses += [j.status.value for j in judged]
            supports += [float(j.support) for j in judged]
            bar.update(len(batch))
    return MethodResult(method, statuses, supports, settings, time.perf_counter() - started)
