"""A BEIR-format folder: loading, slicing and the stable dev/tune split of its queries.

Layout: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``; a header
line is optional).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


class EvaluationError(Exception):
    """The evaluation cannot start (dataset, options or model); the message says why."""


class DatasetError(EvaluationError):
    """The folder is not a usable BEIR-format folder; the message says what is wrong."""


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
