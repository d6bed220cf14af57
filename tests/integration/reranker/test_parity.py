"""The served cross-encoder agrees with FlagEmbedding and transformers on the same weights.

Tiny random XLM-RoBERTa and BERT classifiers (conftest), exported by the export command
and served through the real gRPC server, score the same (query, passage) pairs as
FlagEmbedding's FlagReranker and as transformers directly: the same order, and scores
within 1e-4. A random model proves mechanics, never quality.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundwire.reranker.v1 import reranker_pb2
from groundwire_reranker.export import BuildReport
from groundwire_reranker.export.tiny import Architecture
from groundwire_reranker.models import OnnxCrossEncoder
from groundwire_reranker.settings import RerankerSettings

ARCHS: tuple[Architecture, ...] = ("xlm-roberta", "bert")
TOLERANCE = 1e-4

Query = tuple[str, list[str]]
Served = Callable[..., Any]  # conftest's `served` fixture

DEFAULT_CAP = int(RerankerSettings.model_fields["max_pair_tokens"].default)


@pytest.fixture(scope="module")
def queries(corpus_sentences: list[str], sample_questions: list[str]) -> list[Query]:
    """Three questions with twelve passages each; one passage longer than the pair budget."""
    out: list[Query] = []
    for q, question in enumerate(sample_questions[:3]):
        passages = corpus_sentences[q * 40 : q * 40 + 11]
        passages.append(" ".join(corpus_sentences[200:240]))  # ~600 tokens: truncated
        out.append((question, passages))
    return out


def _flag_scores(checkpoint: Path, max_tokens: int, pairs: list[tuple[str, str]]) -> np.ndarray:
    from FlagEmbedding import FlagReranker

    reranker = FlagReranker(str(checkpoint), use_fp16=False, devices="cpu", max_length=max_tokens)
    return np.asarray(reranker.compute_score(pairs, normalize=True), dtype=np.float64)


def _transformers_scores(
    checkpoint: Path, max_tokens: int, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[int]]:
    """sigmoid(logits) of AutoModelForSequenceClassification, and tokens per pair."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(checkpoint))
    model: Any = AutoModelForSequenceClassification.from_pretrained(str(checkpoint))
    model.eval()
    inputs = tokenizer(
        [q for q, _ in pairs],
        [p for _, p in pairs],
        truncation="only_second",
        max_length=max_tokens,
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = model(**inputs).logits.reshape(-1).double()
    tokens = inputs["attention_mask"].sum(dim=1).tolist()
    return torch.sigmoid(logits).numpy(), [int(t) for t in tokens]


def _ranked(scores: np.ndarray) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


@pytest.mark.parametrize("arch", ARCHS)
async def test_served_scores_match_flagembedding_and_transformers(
    arch: Architecture,
    exported: Callable[[Architecture, bool], BuildReport],
    checkpoints: dict[Architecture, Path],
    queries: list[Query],
    served: Served,
) -> None:
    report = exported(arch, False)
    pairs = [(query, p) for query, passages in queries for p in passages]
    flag_all = _flag_scores(checkpoints[arch], report.max_tokens, pairs)
    hf_all, hf_tokens_all = _transformers_scores(checkpoints[arch], report.max_tokens, pairs)
    # uncut (max_pair_tokens=0): the model's own length, as the references read it
    async with served(model_dir=report.out_dir, max_pair_tokens=0) as stub:
        start = 0
        for query, passages in queries:
            reply = await stub.Rerank(reranker_pb2.RerankRequest(query=query, passages=passages))
            end = start + len(passages)
            flag, hf, hf_tokens = flag_all[start:end], hf_all[start:end], hf_tokens_all[start:end]
            start = end

            served_order = [r.index for r in reply.results]
            served_scores = np.zeros(len(passages))
            served_scores[served_order] = [r.score for r in reply.results]
            assert len(served_order) == len(passages)
            assert served_order == _ranked(flag), "score order differs from FlagReranker"
            assert served_order == _ranked(hf), "score order differs from transformers"
            assert np.abs(served_scores - flag).max() <= TOLERANCE
            assert np.abs(served_scores - hf).max() <= TOLERANCE
            assert np.ptp(served_scores) > 0.01, "degenerate model: the order would prove nothing"
            assert reply.total_tokens == sum(hf_tokens)
            assert max(hf_tokens) == report.max_tokens, "the long passage was cut to the budget"


@pytest.mark.parametrize("arch", ARCHS)
def test_long_pair_truncates_the_passage_not_the_query(
    arch: Architecture,
    exported: Callable[[Architecture, bool], BuildReport],
    checkpoints: dict[Architecture, Path],
    corpus_sentences: list[str],
) -> None:
    from FlagEmbedding.utils.tokenizer_compat import prepare_for_model_compat
    from transformers import AutoTokenizer

    report = exported(arch, False)
    encoder = OnnxCrossEncoder(report.out_dir, intra_op_threads=1)
    encoder.load()
    manifest = encoder.manifest
    hf: Any = AutoTokenizer.from_pretrained(str(checkpoints[arch]))
    query = "how are long manuals cut into pieces before they become searchable"
    passage = " ".join(corpus_sentences[:60])
    long_query = " ".join(corpus_sentences[60:75])
    q_ids = hf(query, add_special_tokens=False)["input_ids"]
    p_ids = hf(passage, add_special_tokens=False)["input_ids"]
    lq_ids = hf(long_query, add_special_tokens=False)["input_ids"]
    assert len(p_ids) > 3 * manifest.max_tokens and len(lq_ids) > manifest.query_max_tokens

    short, capped = encoder.encode_pairs([(query, passage), (long_query, passage)])
    assert len(short.ids) == manifest.max_tokens
    # [CLS]/<s>, then the whole query, then the separator(s), then a passage prefix
    assert short.ids[1 : 1 + len(q_ids)] == q_ids
    head = 1 + len(q_ids)
    separators = short.ids[head : head + (2 if arch == "xlm-roberta" else 1)]
    assert separators == [hf.sep_token_id] * len(separators)
    body = short.ids[head + len(separators) : -1]
    assert body == p_ids[: len(body)] and len(body) > 0
    assert short.ids[-1] == hf.sep_token_id
    if arch == "bert":
        assert short.type_ids == [0] * (head + 1) + [1] * (len(short.ids) - head - 1)

    # A query longer than its share is cut to query_max_tokens, as FlagEmbedding does.
    assert capped.ids[1 : 1 + manifest.query_max_tokens] == lq_ids[: manifest.query_max_tokens]
    assert len(capped.ids) == manifest.max_tokens

    # Token for token what FlagReranker feeds its model.
    for ids, got in ((q_ids, short), (lq_ids, capped)):
        flag = prepare_for_model_compat(
            hf,
            ids[: manifest.query_max_tokens],
            p_ids[: manifest.max_tokens],
            truncation="only_second",
            max_length=manifest.max_tokens,
        )
        assert got.ids == list(flag["input_ids"])


async def test_int8_model_is_served_close_to_fp32(
    exported: Callable[[Architecture, bool], BuildReport],
    build_logs: dict[tuple[str, bool], list[str]],
    queries: list[Query],
    served: Served,
) -> None:
    fp32_report = exported("bert", False)
    int8_report = exported("bert", True)
    assert int8_report.int8 and int8_report.int8_score_mean_abs_diff is not None
    assert int8_report.int8_score_max_abs_diff is not None
    assert any("int8 vs fp32 scores" in line for line in build_logs[("bert", True)])
    query, passages = queries[0]
    request = reranker_pb2.RerankRequest(query=query, passages=passages)
    async with served(model_dir=fp32_report.out_dir) as stub:
        fp32 = {r.index: r.score for r in (await stub.Rerank(request)).results}
    async with served(model_dir=int8_report.out_dir) as stub:
        info = await stub.Info(reranker_pb2.InfoRequest())
        int8 = {r.index: r.score for r in (await stub.Rerank(request)).results}
    assert info.quantized is True and info.ready is True
    diffs = [abs(int8[i] - fp32[i]) for i in fp32]
    assert 0 < max(diffs) <= 0.05, "int8 differs from fp32, but only slightly"


async def test_info_describes_the_served_model_and_load(
    exported: Callable[[Architecture, bool], BuildReport], queries: list[Query], served: Served
) -> None:
    report = exported("xlm-roberta", False)
    async with served(model_dir=report.out_dir, max_batch_passages=64) as stub:
        before = await stub.Info(reranker_pb2.InfoRequest())
        assert before.ready is True
        assert (before.model_id, before.profile, before.max_tokens) == (
            report.model_id,
            "bge-reranker-v2-m3",
            min(report.max_tokens, DEFAULT_CAP),  # the pair cap, when it cuts
        )
        assert before.max_batch_passages == 64 and before.quantized is False
        assert before.queue_depth == 0
        query, passages = queries[1]
        await stub.Rerank(reranker_pb2.RerankRequest(query=query, passages=passages))
        after = await stub.Info(reranker_pb2.InfoRequest())
        assert after.ms_per_passage > 0


async def test_top_n_and_threshold_cut_the_ranking(
    exported: Callable[[Architecture, bool], BuildReport], queries: list[Query], served: Served
) -> None:
    report = exported("bert", False)
    query, passages = queries[2]
    async with served(model_dir=report.out_dir) as stub:
        full = (
            await stub.Rerank(reranker_pb2.RerankRequest(query=query, passages=passages))
        ).results
        top = await stub.Rerank(reranker_pb2.RerankRequest(query=query, passages=passages, top_n=3))
        cut = full[len(full) // 2].score
        above = await stub.Rerank(
            reranker_pb2.RerankRequest(query=query, passages=passages, threshold=cut)
        )
    assert [r.index for r in top.results] == [r.index for r in full[:3]]
    assert top.total_tokens > 0, "tokens count every pair scored, not only those returned"
    kept = [r.index for r in above.results]
    assert kept == [r.index for r in full if r.score >= cut]
    assert 0 < len(kept) < len(full)
