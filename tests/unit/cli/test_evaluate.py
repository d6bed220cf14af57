"""The evaluation's plumbing without services: BEIR loading, the dev split, the
mapping of chunk rankings to document runs, and the metrics through ir-measures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from groundwire_cli.evaluation.ablation import ablation, weight_candidates
from groundwire_cli.evaluation.beir import DatasetError, is_dev, limit_dataset, load_beir
from groundwire_cli.evaluation.metrics import (
    mean_metrics,
    paired_randomization_p,
    per_query_metrics,
    ranking_to_run,
)
from groundwire_cli.evaluation.report import format_table, write_chart
from groundwire_core.clients.embedder import EmbedderInfo
from groundwire_orchestrator.fusion import DEFAULT


def _beir(root: Path, *, qrels_header: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [
        {"_id": f"d{i}", "title": f"Title {i}", "text": f"text {i}", "metadata": {}}
        for i in range(1, 7)
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": q, "text": f"query {q}"} for q in ("q1", "q2", "q3", "q4")]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir(exist_ok=True)
    rows = ["q1\td1\t1", "q1\td2\t1", "q2\td3\t1", "q3\td6\t1", "q3\tmissing\t1"]
    header = "query-id\tcorpus-id\tscore\n" if qrels_header else ""
    (root / "qrels" / "train.tsv").write_text(header + "\n".join(rows) + "\n")
    return root


# --------------------------------------------------------------------------- metrics


def test_known_run_gives_known_ndcg_recall_and_mrr() -> None:
    # q1: relevant d1, d2 retrieved at ranks 1 and 3 -> DCG = 1 + 1/log2(4) = 1.5,
    # IDCG = 1 + 1/log2(3); q2: its one relevant document at rank 2.
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}
    run = {
        "q1": ranking_to_run(["d1", "x", "d2"]),
        "q2": ranking_to_run(["y", "d3"]),
    }
    values = per_query_metrics(run, qrels)
    expected_q1 = 1.5 / (1 + 1 / math.log2(3))
    assert values["nDCG@10"]["q1"] == pytest.approx(expected_q1)
    assert values["nDCG@10"]["q2"] == pytest.approx(1 / math.log2(3))
    assert values["MRR@10"] == pytest.approx({"q1": 1.0, "q2": 0.5})
    assert values["Recall@100"] == pytest.approx({"q1": 1.0, "q2": 1.0})
    mean = mean_metrics(values, ["q1", "q2"])
    assert mean is not None
    assert mean["nDCG@10"] == pytest.approx((expected_q1 + 1 / math.log2(3)) / 2)


def test_a_query_without_results_counts_zero_in_the_mean() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    values = per_query_metrics({"q1": ranking_to_run(["d1"]), "q2": {}}, qrels)
    assert values["nDCG@10"] == {"q1": 1.0, "q2": 0.0}
    mean = mean_metrics(values, ["q1", "q2"])
    assert mean == pytest.approx({"nDCG@10": 0.5, "Recall@100": 0.5, "MRR@10": 0.5})
    assert mean_metrics(values, []) is None


def test_cutoffs_apply_a_hit_at_rank_11_is_outside_ndcg_and_mrr_at_10() -> None:
    ranking = [f"x{i}" for i in range(10)] + ["d1"]
    values = per_query_metrics({"q": ranking_to_run(ranking)}, {"q": {"d1": 1}})
    assert values["nDCG@10"]["q"] == 0.0
    assert values["MRR@10"]["q"] == 0.0
    assert values["Recall@100"]["q"] == 1.0


def test_a_document_ranks_at_its_best_chunk_and_order_survives_ties() -> None:
    # chunk hits of d2 twice and d1 once: d2's best chunk is first
    run = ranking_to_run(["d2", "d1", "d2", "d3"])
    assert list(run) == ["d2", "d1", "d3"]
    assert run["d2"] > run["d1"] > run["d3"], "scores strictly decrease with rank"
    # ir-measures sorts by score; the service's order (not doc-id order) must hold
    values = per_query_metrics({"q": ranking_to_run(["zz", "aa"])}, {"q": {"zz": 1}})
    assert values["MRR@10"]["q"] == 1.0


def test_ranking_is_cut_at_depth_documents() -> None:
    ranking = [f"d{i // 2}" for i in range(400)]  # two chunks per document
    run = ranking_to_run(ranking, depth=100)
    assert len(run) == 100 and "d99" in run and "d100" not in run


def test_paired_randomization_separates_a_real_gain_from_noise() -> None:
    better = [1.0] * 30
    worse = [0.0] * 30
    assert paired_randomization_p(better, worse) < 0.01
    same = [0.5] * 30
    assert paired_randomization_p(same, same) == 1.0
    mixed_a = [1.0, 0.0] * 15
    mixed_b = [0.0, 1.0] * 15
    assert paired_randomization_p(mixed_a, mixed_b) > 0.5


# --------------------------------------------------------------------------- dataset


def test_load_beir_reads_corpus_judged_queries_and_qrels(tmp_path: Path) -> None:
    ds = load_beir(_beir(tmp_path / "set"))
    assert ds.name == "set" and ds.split == "train"
    assert [d.doc_id for d in ds.corpus] == ["d1", "d2", "d3", "d4", "d5", "d6"]
    assert ds.corpus[0].title == "Title 1" and ds.corpus[0].text == "text 1"
    assert list(ds.queries) == ["q1", "q2", "q3"], "q4 has no judgement"
    assert ds.qrels == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}, "q3": {"d6": 1}}
    assert ds.unjudged_queries == 1
    assert ds.unknown_judged_docs == 1
    assert ds.judgements == 4


def test_qrels_without_a_header_line_load_too(tmp_path: Path) -> None:
    ds = load_beir(_beir(tmp_path / "set", qrels_header=False))
    assert ds.qrels["q1"] == {"d1": 1, "d2": 1}


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("no-corpus", "is not a BEIR-format folder: missing corpus.jsonl"),
        ("no-qrels", "missing qrels/train.tsv"),
        ("bad-json", "corpus.jsonl line 2 is not JSON"),
        ("no-id", "queries.jsonl line 1 lacks _id"),
        ("bad-qrels", "has 2 tab-separated cells"),
        ("unknown-query", "judges query 'nope'"),
    ],
)
def test_a_broken_folder_is_refused_with_a_clear_message(
    tmp_path: Path, breakage: str, message: str
) -> None:
    root = _beir(tmp_path / "set")
    if breakage == "no-corpus":
        (root / "corpus.jsonl").unlink()
    elif breakage == "no-qrels":
        (root / "qrels" / "train.tsv").unlink()
    elif breakage == "bad-json":
        with (root / "corpus.jsonl").open() as fh:
            first = fh.readline()
        (root / "corpus.jsonl").write_text(first + "{not json\n")
    elif breakage == "no-id":
        (root / "queries.jsonl").write_text('{"text": "a query"}\n')
    elif breakage == "bad-qrels":
        (root / "qrels" / "train.tsv").write_text("q1\td1\n")
    elif breakage == "unknown-query":
        (root / "qrels" / "train.tsv").write_text("nope\td1\t1\n")
    with pytest.raises(DatasetError) as error:
        load_beir(root)
    assert message in str(error.value)


def test_a_missing_split_names_the_splits_present(tmp_path: Path) -> None:
    root = _beir(tmp_path / "set")
    with pytest.raises(DatasetError, match=r"missing qrels/test\.tsv.*present: train\.tsv"):
        load_beir(root, "test")


def test_limit_keeps_relevant_documents_first_and_drops_orphan_queries(tmp_path: Path) -> None:
    ds = load_beir(_beir(tmp_path / "set"))
    sliced = limit_dataset(ds, docs=3, queries=2)
    assert list(sliced.queries) == ["q1", "q2"]
    assert [d.doc_id for d in sliced.corpus] == ["d1", "d2", "d3"]
    tiny = limit_dataset(ds, docs=1, queries=2)
    assert [d.doc_id for d in tiny.corpus] == ["d1"]
    assert list(tiny.queries) == ["q1"], "q2 lost its only relevant document"
    assert tiny.qrels == {"q1": {"d1": 1}}


def test_the_dev_split_is_deterministic_and_close_to_the_fraction() -> None:
    ids = [str(i) for i in range(4000)]
    dev = [q for q in ids if is_dev(q, 0.2)]
    assert dev == [q for q in reversed(ids) if is_dev(q, 0.2)][::-1], "order-independent"
    assert 0.17 < len(dev) / len(ids) < 0.23
    assert not any(is_dev(q, 0.0) for q in ids)
    assert all(is_dev(q, 1.0) for q in ids)
    # a larger fraction only adds queries to dev: the hash threshold is monotone
    assert set(dev) <= {q for q in ids if is_dev(q, 0.3)}


# --------------------------------------------------------------------------- configurations


def _info(outputs: frozenset[str]) -> EmbedderInfo:
    return EmbedderInfo("m", "minilm", 384, 256, outputs)


def test_ablation_skips_sparse_without_the_output_and_rerank_without_a_model() -> None:
    configs = {c.name: c for c in ablation(_info(frozenset({"dense"})), reranker_reason="none")}
    assert list(configs) == [
        "bm25",
        "dense",
        "sparse",
        "hybrid-rrf",
        "hybrid-weighted",
        "product-default",
        "hybrid-rrf+rerank",
    ]
    assert "no learned sparse output" in configs["sparse"].skipped
    assert configs["hybrid-rrf+rerank"].skipped == "none"
    assert configs["hybrid-rrf"].paths == ("dense", "bm25")
    assert (
        not configs["hybrid-weighted"].skipped and configs["hybrid-weighted"].fusion == "weighted"
    )


def test_the_product_default_row_is_the_orchestrators_default_fusion() -> None:
    configs = {c.name: c for c in ablation(_info(frozenset({"dense"})), reranker_reason="")}
    row = configs["product-default"]
    assert (row.paths, row.fusion, dict(row.weights)) == (
        ("dense", "bm25"),
        DEFAULT.method,
        dict(DEFAULT.weights),
    )
    assert DEFAULT.method == "weighted" and not row.skipped


def test_ablation_uses_learned_sparse_when_the_model_has_it() -> None:
    configs = {
        c.name: c for c in ablation(_info(frozenset({"dense", "sparse"})), reranker_reason="")
    }
    assert not configs["sparse"].skipped and not configs["hybrid-rrf+rerank"].skipped
    assert configs["hybrid-rrf"].paths == ("dense", "sparse", "bm25")


def test_weight_grid_sums_to_one_and_shares_the_lexical_part() -> None:
    for weights in weight_candidates(("dense", "sparse", "bm25")):
        assert sum(weights.values()) == pytest.approx(1.0, abs=1e-3)
        assert weights["sparse"] == weights["bm25"]
    assert [w["dense"] for w in weight_candidates(("dense", "bm25"))] == sorted(
        {w["dense"] for w in weight_candidates(("dense", "bm25"))}
    )


# --------------------------------------------------------------------------- output


def _report() -> dict[str, object]:
    metrics = {"nDCG@10": 0.5, "Recall@100": 0.9, "MRR@10": 0.45}
    ok = {
        "status": "ok",
        "metrics": {"dev": metrics, "tune": metrics, "all": metrics},
        "latency_ms": {"p50": 3.0, "p95": 4.0},
    }
    return {
        "dataset": {"name": "tiny", "split": "train", "documents": 6, "queries": 3},
        "query_sets": {"dev": 1, "tune": 2, "all": 3},
        "model": {"embedder": "m"},
        "configurations": [
            {"name": "bm25", "label": "bm25", **ok},
            {"name": "hybrid-rrf", "label": "hybrid-rrf", **ok},
            {"name": "sparse", "label": "sparse", "status": "skipped", "reason": "no sparse"},
        ],
        "comparison": {
            "best_single": "bm25",
            "hybrid-rrf": {"delta": 0.0, "wins": 0, "losses": 0, "ties": 1, "p_value": 1.0},
        },
    }


def test_table_lists_every_configuration_and_the_skip_reasons() -> None:
    table = format_table(_report())
    assert "sparse" in table and "skipped: no sparse" in table
    assert "0.500" in table and "0.900" in table
    assert "vs best single path (bm25)" in table


def test_chart_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "chart.png"
    write_chart(_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000
