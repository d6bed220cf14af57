"""`groundwire eval retrieval`: a retrieval ablation on any BEIR-format folder.

The run goes through the real services, exactly as the product uses them: the
embedder and the retriever (and the reranker, when a model is given) start as child
processes on a fresh, temporary store; the corpus goes in through the retriever's
streaming ``Ingest`` as plain-text documents (source id = the BEIR ``_id``, title =
its title); every query is embedded through the embedder and searched through the
retriever's ``Search`` once per configuration of the ablation.

The retriever returns chunks; a document ranks where its best chunk ranks. Rankings
are scored with ir-measures (nDCG@10, R@100 and RR@10, i.e. MRR@10) on a dev part of
the queries (chosen by a hash of the query id, so it never changes) and on all of
them; the rest (the "tune" part) is where the weighted fusion's weights are chosen.

Layout of a BEIR folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id``,
``corpus-id``, ``score``; a header line is optional).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import ir_measures
import numpy as np
from tqdm import tqdm

from groundwire.common.v1 import common_pb2
from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from groundwire.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from groundwire_cli.child_settings import user_environment
from groundwire_cli.cluster import LocalCluster
from groundwire_cli.config import default_model_dir
from groundwire_cli.progress import progress
from groundwire_core.clients.embedder import EmbedderClient, EmbedderInfo
from groundwire_core.grpc.client import create_channel, rpc_errors

COLLECTION = "eval"
INGEST_BATCH = 64
EMBED_BATCH = 64
DEPTH = 100
"""Documents kept per query: the deepest cut-off of the metrics (Recall@100)."""
WEIGHT_GRID = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Dense weights tried for the weighted fusion on the tune part; lexical paths share
the rest."""
RERANK_DEPTH = 100

METRICS: dict[str, Any] = {
    "nDCG@10": ir_measures.nDCG @ 10,
    "Recall@100": ir_measures.R @ 100,
    "MRR@10": ir_measures.RR @ 10,
}
_METRIC_NAMES = {measure: name for name, measure in METRICS.items()}
QUERY_SETS = ("dev", "tune", "all")

_PATHS = {
    "dense": retriever_pb2.SEARCH_PATH_DENSE,
    "sparse": retriever_pb2.SEARCH_PATH_SPARSE,
    "bm25": retriever_pb2.SEARCH_PATH_BM25,
}


class EvaluationError(Exception):
    """The evaluation cannot start (dataset, options or model); the message says why."""


class DatasetError(EvaluationError):
    """The folder is not a usable BEIR-format folder; the message says what is wrong."""


# --------------------------------------------------------------------------- dataset


@dataclass(frozen=True)
class CorpusDoc:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR folder, reduced to the queries that the split judges."""

    name: str
    path: Path
    split: str
    corpus: tuple[CorpusDoc, ...]
    queries: dict[str, str]
    """Judged queries only, in file order: id -> text."""
    qrels: dict[str, dict[str, int]]
    """query id -> document id -> relevance (> 0 is relevant)."""
    unjudged_queries: int = 0
    """Queries in queries.jsonl that the split does not judge (not evaluated)."""
    unknown_judged_docs: int = 0
    """Judgements naming a document that is not in the corpus (ignored)."""

    @property
    def judgements(self) -> int:
        return sum(len(docs) for docs in self.qrels.values())


def _jsonl(path: Path, required: Sequence[str]) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(
                    f"{path} line {number} is not JSON ({error.msg}); "
                    "a BEIR .jsonl file holds one JSON object per line"
                ) from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path} line {number} is not a JSON object")
            missing = [key for key in required if not isinstance(row.get(key), str | int)]
            if missing:
                raise DatasetError(
                    f"{path} line {number} lacks {', '.join(missing)} "
                    f"(BEIR rows need {', '.join(required)})"
                )
            yield row


def load_beir(path: Path, split: str = "train") -> BeirDataset:
    """Reads a BEIR-format folder. Raises DatasetError naming what is missing or malformed."""
    if not path.is_dir():
        raise DatasetError(f"{path} is not a folder")
    needed = [path / "corpus.jsonl", path / "queries.jsonl", path / "qrels" / f"{split}.tsv"]
    missing = [str(p.relative_to(path)) for p in needed if not p.is_file()]
    if missing:
        found = (
            sorted(p.name for p in (path / "qrels").glob("*.tsv"))
            if (path / "qrels").is_dir()
            else []
        )
        hint = f"; qrels splits present: {', '.join(found)}" if found else ""
        raise DatasetError(
            f"{path} is not a BEIR-format folder: missing {', '.join(missing)} "
            f"(expected corpus.jsonl, queries.jsonl and qrels/{split}.tsv){hint}"
        )
    corpus_path, queries_path, qrels_path = needed
    corpus: list[CorpusDoc] = []
    seen: set[str] = set()
    for row in _jsonl(corpus_path, ("_id",)):
        doc_id = str(row["_id"])
        if doc_id in seen:
            raise DatasetError(f"{corpus_path} lists document {doc_id!r} twice")
        seen.add(doc_id)
        corpus.append(CorpusDoc(doc_id, str(row.get("title") or ""), str(row.get("text") or "")))
    if not corpus:
        raise DatasetError(f"{corpus_path} holds no documents")
    all_queries = {str(r["_id"]): str(r["text"]) for r in _jsonl(queries_path, ("_id", "text"))}

    qrels: dict[str, dict[str, int]] = {}
    unknown_docs = 0
    with qrels_path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            cells = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if number == 1 and cells[0] in ("query-id", "query_id", "qid"):
                continue  # the header BEIR writes
            if len(cells) != 3:
                raise DatasetError(
                    f"{qrels_path} line {number} has {len(cells)} tab-separated cells; "
                    "expected query-id, corpus-id, score"
                )
            qid, doc_id, raw = cells
            try:
                relevance = int(float(raw))
            except ValueError:
                raise DatasetError(
                    f"{qrels_path} line {number}: score {raw!r} is not a number"
                ) from None
            if qid not in all_queries:
                raise DatasetError(
                    f"{qrels_path} line {number} judges query {qid!r}, "
                    f"which {queries_path.name} does not have"
                )
            if doc_id not in seen:
                unknown_docs += 1
                continue
            qrels.setdefault(qid, {})[doc_id] = relevance
    qrels = {q: docs for q, docs in qrels.items() if any(v > 0 for v in docs.values())}
    if not qrels:
        raise DatasetError(f"{qrels_path} judges no query relevant to any corpus document")
    queries = {qid: text for qid, text in all_queries.items() if qid in qrels}
    return BeirDataset(
        name=path.resolve().name,
        path=path,
        split=split,
        corpus=tuple(corpus),
        queries=queries,
        qrels={qid: qrels[qid] for qid in queries},
        unjudged_queries=len(all_queries) - len(queries),
        unknown_judged_docs=unknown_docs,
    )


def limit_dataset(
    dataset: BeirDataset, *, docs: int | None = None, queries: int | None = None
) -> BeirDataset:
    """A slice for quick runs: the first ``queries`` judged queries, then ``docs``
    documents — those relevant to the kept queries first, the rest in corpus order.
    Queries left with no relevant document in the slice are dropped."""
    query_ids = list(dataset.queries)[: queries if queries is not None else None]
    corpus = dataset.corpus
    if docs is not None:
        wanted = {d for q in query_ids for d, rel in dataset.qrels[q].items() if rel > 0}
        relevant = [d for d in corpus if d.doc_id in wanted]
        others = [d for d in corpus if d.doc_id not in wanted]
        kept = {d.doc_id for d in (relevant + others)[:docs]}
        corpus = tuple(d for d in corpus if d.doc_id in kept)
    kept_ids = {d.doc_id for d in corpus}
    qrels: dict[str, dict[str, int]] = {}
    for qid in query_ids:
        judged = {d: rel for d, rel in dataset.qrels[qid].items() if d in kept_ids}
        if any(rel > 0 for rel in judged.values()):
            qrels[qid] = judged
    return replace(
        dataset,
        corpus=corpus,
        queries={q: dataset.queries[q] for q in query_ids if q in qrels},
        qrels=qrels,
    )


def is_dev(query_id: str, fraction: float) -> bool:
    """Whether a query belongs to the dev part: a hash of its id, so the split is the
    same on every run and machine and does not depend on file order."""
    digest = hashlib.sha256(query_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


# --------------------------------------------------------------------------- metrics


def ranking_to_run(doc_ids: Iterable[str], depth: int = DEPTH) -> dict[str, float]:
    """A ranking (best first, repeats allowed) as an ir-measures run for one query.

    The first occurrence of a document is its best chunk. Scores are derived from
    ranks (strictly decreasing), so the metrics see exactly the service's order —
    including its tie-breaks, which raw fused scores (RRF ties are common) would lose.
    """
    ranked: list[str] = []
    seen: set[str] = set()
    for doc_id in doc_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            ranked.append(doc_id)
            if len(ranked) == depth:
                break
    return {doc_id: float(len(ranked) - i) for i, doc_id in enumerate(ranked)}


def per_query_metrics(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, float]]:
    """metric -> query id -> value, for every query in ``qrels``; a query the run has
    nothing for scores 0 (it is never left out of the mean)."""
    values = {name: dict.fromkeys(qrels, 0.0) for name in METRICS}
    judged_run = {qid: dict(docs) for qid, docs in run.items() if qid in qrels and docs}
    for metric in ir_measures.iter_calc(list(METRICS.values()), dict(qrels), judged_run):
        values[_METRIC_NAMES[metric.measure]][str(metric.query_id)] = float(metric.value)
    return values


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], query_ids: Sequence[str]
) -> dict[str, float] | None:
    """The mean of each metric over ``query_ids``; None when there are none."""
    if not query_ids:
        return None
    return {
        name: sum(values[q] for q in query_ids) / len(query_ids)
        for name, values in per_query.items()
    }


def paired_randomization_p(a: Sequence[float], b: Sequence[float], rounds: int = 10_000) -> float:
    """Two-sided p-value of a paired randomization test on mean(a - b) (fixed seed)."""
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diffs.size == 0 or not diffs.any():
        return 1.0
    observed = abs(diffs.mean())
    signs = np.random.default_rng(0).choice((-1.0, 1.0), size=(rounds, diffs.size))
    extreme = np.count_nonzero(np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12)
    return float((extreme + 1) / (rounds + 1))


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Configuration:
    """One row of the ablation."""

    name: str
    paths: tuple[str, ...]
    fusion: str = "rrf"
    weights: Mapping[str, float] = field(default_factory=dict)
    rerank: bool = False
    skipped: str = ""
    """Why it was not run (empty when it ran)."""

    @property
    def label(self) -> str:
        if self.fusion == "weighted" and self.weights:
            shown = ", ".join(f"{p} {w:.2f}" for p, w in self.weights.items())
            return f"{self.name} ({shown})"
        return self.name


def ablation(info: EmbedderInfo, *, reranker_reason: str) -> list[Configuration]:
    """The configurations: single paths, the two fusions, and hybrid + rerank.

    ``reranker_reason`` is empty when a reranker model is ready, else why not.
    """
    has_sparse = "sparse" in info.outputs
    lexical = ("sparse", "bm25") if has_sparse else ("bm25",)
    hybrid = ("dense", *lexical)
    no_sparse = (
        f"the embedder's model ({info.model_id or info.profile}) has no learned sparse output"
    )
    return [
        Configuration("bm25", ("bm25",)),
        Configuration("dense", ("dense",)),
        Configuration("sparse", ("sparse",), skipped="" if has_sparse else no_sparse),
        Configuration("hybrid-rrf", hybrid),
        Configuration("hybrid-weighted", hybrid, fusion="weighted"),
        Configuration("hybrid-rrf+rerank", hybrid, rerank=True, skipped=reranker_reason),
    ]


def weight_candidates(paths: Sequence[str]) -> list[dict[str, float]]:
    """The weight grid: the dense weight varies, the lexical paths share the rest."""
    lexical = [p for p in paths if p != "dense"]
    grid: list[dict[str, float]] = []
    for dense in WEIGHT_GRID:
        weights = {"dense": dense}
        weights.update({p: round((1.0 - dense) / len(lexical), 4) for p in lexical})
        grid.append(weights)
    return grid


@dataclass(frozen=True)
class EvalSettings:
    path_limit: int = 100
    """Candidates per path (>= 100 so that Recall@100 means something)."""
    rrf_k: int = 60
    dense_floor: float = 0.0
    """Cosine floor of the dense path. The service's default (0.3) guards chat
    answers against junk; a ranking metric wants every path's full candidate list."""
    dev_fraction: float = 0.2
    depth: int = DEPTH
    rerank_depth: int = RERANK_DEPTH
    chunk_max_tokens: int | None = None
    """Passed to the retriever (GROUNDWIRE_RETRIEVER_CHUNK_MAX_TOKENS); None keeps its
    default."""
    weights: Mapping[str, float] | None = None
    """Fixed weights for the weighted fusion; None chooses them on the tune part."""


# --------------------------------------------------------------------------- services


@dataclass(frozen=True)
class EmbeddedQuery:
    query_id: str
    text: str
    dense: tuple[float, ...]
    sparse: dict[int, float] | None


@dataclass
class ConfigRun:
    """What one configuration produced: rankings and client-side latencies."""

    rankings: dict[str, list[str]] = field(default_factory=dict)
    ms: list[float] = field(default_factory=list)


class Searcher:
    """Runs one configuration for one query through Search (and Rerank)."""

    def __init__(
        self,
        retriever: grpc.aio.Channel,
        reranker: grpc.aio.Channel | None,
        settings: EvalSettings,
        max_rerank_passages: int = RERANK_DEPTH,
    ) -> None:
        self._retriever = retriever_pb2_grpc.RetrieverServiceStub(retriever)
        self._reranker = (
            reranker_pb2_grpc.RerankerServiceStub(reranker) if reranker is not None else None
        )
        self._settings = settings
        self._rerank_depth = min(settings.rerank_depth, max_rerank_passages)

    async def ranking(self, config: Configuration, query: EmbeddedQuery) -> list[str]:
        """Source ids of the fused chunk hits, best first (repeats kept)."""
        s = self._settings
        request = retriever_pb2.SearchRequest(
            collection=COLLECTION,
            text=query.text,
            dense=common_pb2.DenseVector(values=query.dense),
            paths=[_PATHS[p] for p in config.paths],
            path_limit=s.path_limit,
            fusion=(
                retriever_pb2.FUSION_WEIGHTED
                if config.fusion == "weighted"
                else retriever_pb2.FUSION_RRF
            ),
            rrf_k=s.rrf_k,
            weights=dict(config.weights),
            dense_floor=s.dense_floor,
            # a fused list holds up to one full list per path
            limit=s.path_limit * len(config.paths),
        )
        if query.sparse:
            indices = sorted(query.sparse)
            request.sparse.CopyFrom(
                common_pb2.SparseVector(indices=indices, values=[query.sparse[i] for i in indices])
            )
        with rpc_errors("retriever"):
            reply = await self._retriever.Search(request, timeout=60)
        hits = list(reply.hits)
        if config.rerank and self._reranker is not None and hits:
            head = hits[: self._rerank_depth]
            with rpc_errors("reranker"):
                scored = await self._reranker.Rerank(
                    reranker_pb2.RerankRequest(
                        query=query.text, passages=[h.chunk.text for h in head]
                    ),
                    timeout=120,
                )
            hits = [head[r.index] for r in scored.results] + hits[len(head) :]
        return [h.chunk.source_id for h in hits]


async def _ingest(
    channel: grpc.aio.Channel, corpus: Sequence[CorpusDoc], bar: tqdm[Any]
) -> dict[str, Any]:
    stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
    started = time.perf_counter()
    ingested = chunks = 0
    skipped: list[dict[str, str]] = []
    for start in range(0, len(corpus), INGEST_BATCH):
        docs = [
            retriever_pb2.Document(
                source_id=d.doc_id,
                content=d.text.encode("utf-8"),
                format=retriever_pb2.DOCUMENT_FORMAT_TEXT,
                title=d.title,
            )
            for d in corpus[start : start + INGEST_BATCH]
        ]
        request = retriever_pb2.IngestRequest(
            collection=COLLECTION, documents=docs, create_collection=True
        )
        with rpc_errors("retriever"):
            async for event in stub.Ingest(request, timeout=900):
                if event.HasField("progress"):
                    bar.update(1)
                if event.HasField("report"):
                    ingested += event.report.ingested
                    chunks += event.report.chunks_written
                    skipped.extend(
                        {"source_id": r.source_id, "reason": r.reason}
                        for r in event.report.documents
                        if r.status == retriever_pb2.DOCUMENT_STATUS_SKIPPED
                    )
    return {
        "documents": len(corpus),
        "ingested": ingested,
        "chunks": chunks,
        "skipped": len(skipped),
        "skipped_examples": skipped[:20],
        "seconds": round(time.perf_counter() - started, 2),
    }


async def _embed_queries(
    embedder: EmbedderClient, queries: Mapping[str, str], sparse: bool, bar: tqdm[Any]
) -> list[EmbeddedQuery]:
    outputs = ("dense", "sparse") if sparse else ("dense",)
    items = list(queries.items())
    embedded: list[EmbeddedQuery] = []
    for start in range(0, len(items), EMBED_BATCH):
        batch = items[start : start + EMBED_BATCH]
        vectors = await embedder.embed([text for _, text in batch], query=True, outputs=outputs)
        for (qid, text), vec in zip(batch, vectors, strict=True):
            if vec.dense is None:
                raise RuntimeError("the embedder returned no dense vector")
            embedded.append(EmbeddedQuery(qid, text, vec.dense, vec.sparse))
        bar.update(len(batch))
    return embedded


async def _run_config(
    searcher: Searcher,
    config: Configuration,
    queries: Sequence[EmbeddedQuery],
    desc: str,
) -> ConfigRun:
    result = ConfigRun()
    for query in progress(queries, desc=desc, unit="q", leave=False):
        started = time.perf_counter()
        result.rankings[query.query_id] = await searcher.ranking(config, query)
        result.ms.append((time.perf_counter() - started) * 1e3)
    return result


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


# --------------------------------------------------------------------------- the run


@dataclass
class EvalReport:
    """Everything the JSON holds; ``to_json`` shapes it."""

    dataset: BeirDataset
    settings: EvalSettings
    query_sets: dict[str, list[str]]
    model: dict[str, Any]
    ingest: dict[str, Any]
    configurations: list[dict[str, Any]]
    tuning: dict[str, Any]
    timings: dict[str, float]
    comparison: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        d = self.dataset
        s = self.settings
        return {
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "dataset": {
                "name": d.name,
                "path": str(d.path),
                "split": d.split,
                "documents": len(d.corpus),
                "queries": len(d.queries),
                "judgements": d.judgements,
                "unjudged_queries": d.unjudged_queries,
                "unknown_judged_docs": d.unknown_judged_docs,
            },
            "query_sets": {
                "dev_fraction": s.dev_fraction,
                "rule": "dev when sha256(query id)[:8] / 2**64 < dev_fraction; the rest is tune",
                **{name: len(ids) for name, ids in self.query_sets.items()},
            },
            "model": self.model,
            "settings": {
                "path_limit": s.path_limit,
                "result_limit": "path_limit x paths",
                "depth": s.depth,
                "rrf_k": s.rrf_k,
                "dense_floor": s.dense_floor,
                "chunk_max_tokens": s.chunk_max_tokens,
                "weights": dict(s.weights) if s.weights else "chosen on the tune part",
                "rerank_depth": s.rerank_depth,
                "document_score": "rank of the document's best chunk",
                "metrics_library": f"ir-measures {ir_measures.__version__}",
            },
            "ingest": self.ingest,
            "timings_s": self.timings,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "configurations": self.configurations,
            "tuning": self.tuning,
            "comparison": self.comparison,
        }


def _resolve_model(model_dir: Path) -> None:
    if (model_dir / "groundwire-model.json").exists():
        return
    print(
        f"no model in {model_dir}: building the minilm profile there "
        f"(`groundwire models build minilm --out {model_dir}`)…",
        file=sys.stderr,
        flush=True,
    )
    try:
        from groundwire_embedder.export import build_profile
    except ImportError:
        raise EvaluationError(
            f"no model in {model_dir}, and building one needs the export extra: "
            "pip install -c constraints.txt -e 'services/embedder[export]'"
        ) from None
    build_profile("minilm", model_dir, log=lambda line: print(line, file=sys.stderr))


def _comparison(
    configs: Sequence[dict[str, Any]],
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    dev: Sequence[str],
) -> dict[str, Any]:
    """Each hybrid vs the best single path on dev nDCG@10, with a paired test."""
    ran = {c["name"]: c for c in configs if c["status"] == "ok" and c["metrics"]["dev"]}
    singles = [ran[n] for n in ("bm25", "dense", "sparse") if n in ran]
    hybrids = [ran[n] for n in ("hybrid-rrf", "hybrid-weighted") if n in ran]
    if not singles or not hybrids or not dev:
        return {}
    best_single = max(singles, key=lambda c: c["metrics"]["dev"]["nDCG@10"])
    out: dict[str, Any] = {
        "metric": "nDCG@10",
        "query_set": "dev",
        "best_single": best_single["name"],
    }
    for hybrid in hybrids:
        a = [per_query[hybrid["name"]]["nDCG@10"][q] for q in dev]
        b = [per_query[best_single["name"]]["nDCG@10"][q] for q in dev]
        out[hybrid["name"]] = {
            "delta": round(statistics.fmean(a) - statistics.fmean(b), 4),
            "wins": sum(x > y for x, y in zip(a, b, strict=True)),
            "losses": sum(x < y for x, y in zip(a, b, strict=True)),
            "ties": sum(x == y for x, y in zip(a, b, strict=True)),
            "p_value": round(paired_randomization_p(a, b), 4),
        }
    return out


async def _evaluate_async(
    cluster: LocalCluster,
    dataset: BeirDataset,
    settings: EvalSettings,
    reranker_configured: bool,
    timings: dict[str, float],
) -> EvalReport:
    dev = [q for q in dataset.queries if is_dev(q, settings.dev_fraction)]
    tune = [q for q in dataset.queries if not is_dev(q, settings.dev_fraction)]
    sets = {"dev": dev, "tune": tune, "all": list(dataset.queries)}
    retriever = create_channel(cluster.addr("retriever"))
    embedder_channel = create_channel(cluster.addr("embedder"))
    reranker = create_channel(cluster.addr("reranker")) if reranker_configured else None
    try:
        embedder = EmbedderClient(embedder_channel, timeout_s=120)
        info = await embedder.info()
        reranker_reason = "no reranker model is configured (pass --reranker-model-dir)"
        reranker_info: dict[str, Any] | None = None
        max_passages = RERANK_DEPTH
        if reranker is not None:
            stub = reranker_pb2_grpc.RerankerServiceStub(reranker)
            with rpc_errors("reranker"):
                rinfo = await stub.Info(reranker_pb2.InfoRequest(), timeout=30)
            if rinfo.ready:
                reranker_reason = ""
                reranker_info = {"model_id": rinfo.model_id, "profile": rinfo.profile}
                max_passages = rinfo.max_batch_passages or RERANK_DEPTH
            else:
                reranker_reason = "the reranker has no model loaded"

        started = time.perf_counter()
        with progress(total=len(dataset.corpus), desc="ingest", unit="doc") as bar:
            ingest = await _ingest(retriever, dataset.corpus, bar)
        timings["ingest"] = round(time.perf_counter() - started, 2)

        started = time.perf_counter()
        with progress(total=len(dataset.queries), desc="embed queries", unit="q") as bar:
            queries = await _embed_queries(embedder, dataset.queries, "sparse" in info.outputs, bar)
        timings["embed_queries"] = round(time.perf_counter() - started, 2)

        searcher = Searcher(retriever, reranker, settings, max_passages)
        configs = ablation(info, reranker_reason=reranker_reason)

        tuning: dict[str, Any] = {}
        weighted = next(c for c in configs if c.fusion == "weighted")
        if settings.weights is not None:
            weights: Mapping[str, float] = dict(settings.weights)
            tuning = {"weights": dict(weights), "source": "--weights"}
        elif not tune:
            weights = weight_candidates(weighted.paths)[len(WEIGHT_GRID) // 2]
            tuning = {"weights": dict(weights), "source": "no tune queries: equal weights"}
        else:
            started = time.perf_counter()
            by_id = {q.query_id: q for q in queries}
            tune_queries = [by_id[q] for q in tune]
            grid: list[dict[str, Any]] = []
            for candidate in weight_candidates(weighted.paths):
                trial = replace(weighted, weights=candidate)
                run = await _run_config(searcher, trial, tune_queries, f"tune {trial.label}")
                scores = per_query_metrics(
                    {q: ranking_to_run(r, settings.depth) for q, r in run.rankings.items()},
                    {q: dataset.qrels[q] for q in tune},
                )
                mean = mean_metrics(scores, tune)
                assert mean is not None
                grid.append({"weights": candidate, "tune_nDCG@10": round(mean["nDCG@10"], 4)})
            best = max(grid, key=lambda g: g["tune_nDCG@10"])
            weights = best["weights"]
            tuning = {
                "weights": dict(weights),
                "source": "best nDCG@10 on the tune part",
                "grid": grid,
                "seconds": round(time.perf_counter() - started, 2),
            }
        configs = [replace(c, weights=weights) if c is weighted else c for c in configs]

        results: list[dict[str, Any]] = []
        per_query_all: dict[str, dict[str, dict[str, float]]] = {}
        for config in configs:
            entry: dict[str, Any] = {
                "name": config.name,
                "label": config.label,
                "paths": list(config.paths),
                "fusion": config.fusion if len(config.paths) > 1 else None,
                "weights": dict(config.weights) or None,
                "rerank": config.rerank,
            }
            if config.skipped:
                results.append({**entry, "status": "skipped", "reason": config.skipped})
                continue
            started = time.perf_counter()
            run = await _run_config(searcher, config, queries, config.label)
            seconds = time.perf_counter() - started
            per_query = per_query_metrics(
                {q: ranking_to_run(r, settings.depth) for q, r in run.rankings.items()},
                dataset.qrels,
            )
            per_query_all[config.name] = per_query
            means = {name: mean_metrics(per_query, ids) for name, ids in sets.items()}
            results.append(
                {
                    **entry,
                    "status": "ok",
                    "metrics": {
                        name: ({k: round(v, 4) for k, v in m.items()} if m else None)
                        for name, m in means.items()
                    },
                    "latency_ms": {
                        "p50": round(_percentile(run.ms, 50), 2),
                        "p95": round(_percentile(run.ms, 95), 2),
                    },
                    "seconds": round(seconds, 2),
                    "per_query": {
                        "query_ids": list(dataset.queries),
                        **{
                            name: [round(values[q], 4) for q in dataset.queries]
                            for name, values in per_query.items()
                        },
                    },
                }
            )
            timings[f"search_{config.name}"] = round(seconds, 2)
    finally:
        for channel in (retriever, embedder_channel, reranker):
            if channel is not None:
                await channel.close()
    return EvalReport(
        dataset=dataset,
        settings=settings,
        query_sets=sets,
        model={
            "embedder": info.model_id,
            "profile": info.profile,
            "dense_dims": info.dense_dims,
            "max_tokens": info.max_tokens,
            "outputs": sorted(info.outputs),
            "reranker": reranker_info,
        },
        ingest=ingest,
        configurations=results,
        tuning=tuning,
        timings=timings,
        comparison=_comparison(results, per_query_all, dev),
    )


def evaluate(
    dataset: BeirDataset,
    settings: EvalSettings,
    *,
    model_dir: Path,
    reranker_model_dir: Path | None = None,
) -> EvalReport:
    """Starts the services on a temporary store, ingests, searches, scores.

    Raises ClusterError when a service does not start, GroundwireError when a call
    fails.
    """
    extra_env: dict[str, str] = {}
    if settings.chunk_max_tokens is not None:
        extra_env["GROUNDWIRE_RETRIEVER_CHUNK_MAX_TOKENS"] = str(settings.chunk_max_tokens)
    if reranker_model_dir is not None:
        extra_env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(reranker_model_dir)
    names = ("embedder", "retriever") + (("reranker",) if reranker_model_dir else ())
    timings: dict[str, float] = {}
    total = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="groundwire-eval-") as tmp:
        cluster = LocalCluster.with_free_ports(
            Path(tmp) / "run", model_dir, Path(tmp) / "qdrant", extra_env=extra_env
        )
        with cluster:
            started = time.perf_counter()
            print(f"starting {', '.join(names)} (store in {tmp})…", file=sys.stderr, flush=True)
            cluster.start(names)
            cluster.wait_ready(names=names)
            timings["start_services"] = round(time.perf_counter() - started, 2)
            report = asyncio.run(
                _evaluate_async(cluster, dataset, settings, reranker_model_dir is not None, timings)
            )
    timings["total"] = round(time.perf_counter() - total, 2)
    return report


# --------------------------------------------------------------------------- output


def format_table(report: dict[str, Any]) -> str:
    """The ablation as a text table: dev and all-query metrics and latency."""
    d = report["dataset"]
    sets = report["query_sets"]
    lines = [
        f"retrieval ablation — {d['name']} ({d['split']}): {d['documents']} documents, "
        f"{d['queries']} judged queries (dev {sets['dev']}, tune {sets['tune']}); "
        f"model {report['model']['embedder']}",
    ]
    header = (
        f"{'configuration':<40} {'dev nDCG@10':>11} {'R@100':>6} {'MRR@10':>6} | "
        f"{'all nDCG@10':>11} {'R@100':>6} {'MRR@10':>6} | {'p50 ms':>7}"
    )
    lines += [header, "-" * len(header)]

    def cells(metrics: Mapping[str, float] | None) -> str:
        if not metrics:
            return f"{'—':>11} {'—':>6} {'—':>6}"
        return (
            f"{metrics['nDCG@10']:>11.3f} {metrics['Recall@100']:>6.3f} {metrics['MRR@10']:>6.3f}"
        )

    for c in report["configurations"]:
        if c["status"] != "ok":
            lines.append(f"{c['label']:<40} skipped: {c['reason']}")
            continue
        m = c["metrics"]
        lines.append(
            f"{c['label']:<40} {cells(m['dev'])} | {cells(m['all'])} | "
            f"{c['latency_ms']['p50']:>7.1f}"
        )
    comparison = report.get("comparison") or {}
    for name in ("hybrid-rrf", "hybrid-weighted"):
        if name in comparison:
            c = comparison[name]
            lines.append(
                f"{name} vs best single path ({comparison['best_single']}) on dev nDCG@10: "
                f"{c['delta']:+.4f} (wins {c['wins']}, losses {c['losses']}, ties {c['ties']}; "
                f"paired randomization p = {c['p_value']:.3f})"
            )
    return "\n".join(lines)


def write_chart(report: dict[str, Any], path: Path) -> None:
    """A grouped bar chart: one panel per query set, one bar per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = [c for c in report["configurations"] if c["status"] == "ok"]
    panels = [s for s in ("dev", "all") if ran and ran[0]["metrics"][s]]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6.5 * max(1, len(panels)), 5.4))
    axes_list = list(np.atleast_1d(axes))
    width = 0.8 / max(1, len(ran))
    for ax, panel in zip(axes_list, panels, strict=False):
        for i, config in enumerate(ran):
            values = [config["metrics"][panel][m] for m in METRICS]
            xs = [j + (i - (len(ran) - 1) / 2) * width for j in range(len(METRICS))]
            bars = ax.bar(xs, values, width, label=config["label"])
            ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
        ax.set_xticks(range(len(METRICS)), list(METRICS))
        ax.set_ylim(0, 1.12)
        n = report["query_sets"][panel]
        ax.set_title(f"{panel} queries (n={n})")
        ax.grid(axis="y", alpha=0.3)
    skipped = [c["name"] for c in report["configurations"] if c["status"] != "ok"]
    d = report["dataset"]
    fig.suptitle(
        f"{d['name']} ({d['split']}) — {report['model']['embedder']}"
        + (f"; skipped: {', '.join(skipped)}" if skipped else ""),
        fontsize=10,
    )
    handles, labels = axes_list[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, max(1, len(labels))), fontsize=8)
    fig.tight_layout(rect=(0.0, 0.1, 1.0, 1.0))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _dumps(value: Any, indent: int = 0) -> str:
    """JSON with objects indented and lists of scalars kept on one line (per-query
    columns stay compact)."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {_dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [f"{pad}{_dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-") or "dataset"


def _weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in _PATHS or not value:
            raise argparse.ArgumentTypeError(
                f"{part!r}: use PATH=WEIGHT with PATH one of {', '.join(_PATHS)}"
            )
        weight = float(value)
        if not math.isfinite(weight) or weight < 0:
            raise argparse.ArgumentTypeError(f"{part!r}: a weight is a non-negative number")
        weights[name.strip()] = weight
    return weights


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `groundwire eval retrieval`."""
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-format folder")
    parser.add_argument("--split", default="train", help="qrels/SPLIT.tsv (default: %(default)s)")
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=0.2,
        help="share of the judged queries in the dev part, by a hash of the query id "
        "(default: %(default)s); the rest is the tune part",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON report (default: evals/retrieval-NAME.json); "
        "the chart is written beside it as .png",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=default_model_dir(user_environment()),
        help="embedder model folder; built (minilm) when missing (default: %(default)s)",
    )
    parser.add_argument(
        "--reranker-model-dir",
        type=Path,
        default=None,
        help="reranker model folder; without it the + rerank configuration is skipped",
    )
    parser.add_argument(
        "--limit-docs",
        type=_positive,
        default=None,
        help="ingest at most N documents (relevant ones first)",
    )
    parser.add_argument(
        "--limit-queries", type=_positive, default=None, help="evaluate the first N judged queries"
    )
    parser.add_argument(
        "--path-limit",
        type=int,
        default=100,
        help="candidates per path, at least 100 (default: %(default)s)",
    )
    parser.add_argument("--rrf-k", type=_positive, default=60, help="RRF k (default: %(default)s)")
    parser.add_argument(
        "--dense-floor",
        type=float,
        default=0.0,
        help="cosine floor of the dense path (default: %(default)s; the service's 0.3 is "
        "for answers, not rankings)",
    )
    parser.add_argument(
        "--weights",
        type=_weights,
        default=None,
        help="fixed weights for hybrid-weighted, e.g. dense=0.6,bm25=0.4 "
        "(default: chosen on the tune part)",
    )
    parser.add_argument(
        "--chunk-max-tokens",
        type=_positive,
        default=None,
        help="the retriever's chunk budget for this run (default: the retriever's own)",
    )


def run_command(args: argparse.Namespace) -> int:
    """`groundwire eval retrieval`: returns the exit code (2 for a bad dataset or option)."""
    if args.path_limit < DEPTH:
        print(f"error: --path-limit must be at least {DEPTH} for Recall@{DEPTH}", file=sys.stderr)
        return 2
    if not 0.0 <= args.dev_fraction <= 1.0:
        print("error: --dev-fraction must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        dataset = load_beir(args.dataset, args.split)
        if args.limit_docs or args.limit_queries:
            dataset = limit_dataset(dataset, docs=args.limit_docs, queries=args.limit_queries)
            if not dataset.queries:
                raise DatasetError("the slice keeps no judged query; raise --limit-docs")
        _resolve_model(args.model_dir)
    except EvaluationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out: Path = args.out or Path("evals") / f"retrieval-{_slug(dataset.name)}.json"
    settings = EvalSettings(
        path_limit=args.path_limit,
        rrf_k=args.rrf_k,
        dense_floor=args.dense_floor,
        dev_fraction=args.dev_fraction,
        chunk_max_tokens=args.chunk_max_tokens,
        weights=args.weights,
    )
    print(
        f"{dataset.name}: {len(dataset.corpus)} documents, {len(dataset.queries)} judged "
        f"queries ({args.split}); dense floor {settings.dense_floor} for this evaluation",
        file=sys.stderr,
        flush=True,
    )
    report = evaluate(
        dataset, settings, model_dir=args.model_dir, reranker_model_dir=args.reranker_model_dir
    ).to_json()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_dumps(report) + "\n", encoding="utf-8")
    chart = out.with_suffix(".png")
    write_chart(report, chart)
    print(format_table(report))
    print(f"wrote {out} and {chart}")
    return 0
