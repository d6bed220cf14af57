"""`groundwire demo`: a local cluster on free ports, the sample corpus ingested, the
sample questions searched (ranked results with sources), then one or two of them
asked through ``POST /v1/chat``: the answer with its [n] citations, the cited
sources, each citation's verification, the answer mode and the stage report.

Without an API key the answer is extractive (quoted sentences of the top excerpts),
so every citation must be a verbatim quote (or, with an entailment model, supported):
the command exits 1 when one is not. Only a method that reads meaning (nli, llm) makes
a citation "supported"; without one the output says plainly that the answer is a set
of quoted passages chosen by similarity.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from groundwire_cli.chat import (
    MEANING_METHODS,
    QUOTED,
    SUPPORTED,
    ChatOutcome,
    ChatProtocolError,
    ChatRequestError,
    Citation,
    Stage,
    ask,
)
from groundwire_cli.cluster import ClusterError, LocalCluster
from groundwire_cli.config import FileSettings, checkout_root
from groundwire_cli.ingest import IngestTotals, find_documents, ingest_with_progress

# the checkout's samples wherever the command runs; relative only for an installed CLI
_SAMPLES = (checkout_root() or Path(".")) / "samples"
DEFAULT_CORPUS = _SAMPLES / "corpus"
DEFAULT_QUESTIONS = _SAMPLES / "questions.txt"
DEMO_COLLECTION = "samples"
"""The demo's collection: the store is the one `groundwire up` uses later, and the
samples in ``docs`` (the default of ingest, chat and the gateway) were answering a
user's questions about their own documents (issue #32)."""
MODE_LABELS = {
    "extractive": "EXTRACTIVE — sentences quoted from the excerpts; no language model",
    "generated": "GENERATED — written by the language model from the excerpts",
    "declined": "DECLINED — the documents do not answer this",
}


def read_questions(path: Path) -> list[str]:
    """The non-empty lines of ``path`` that are not ``#`` comments."""
    return [
        q.strip()
        for q in path.read_text(encoding="utf-8").splitlines()
        if q.strip() and not q.lstrip().startswith("#")
    ]


def ingest_corpus(retriever_addr: str, collection: str, corpus: Path) -> IngestTotals:
    """Ingests every document under ``corpus`` (source ids relative to it), with a
    progress bar on stderr and the totals printed."""
    files = find_documents([corpus])
    if not files:
        raise FileNotFoundError(f"no documents under {corpus}")
    return ingest_with_progress(retriever_addr, collection, files, root=corpus)


@contextmanager
def serving_corpus(
    *,
    model_dir: Path,
    run_dir: Path,
    data_path: Path,
    corpus: Path,
    collection: str,
    extra_env: Mapping[str, str] | None = None,
    file: FileSettings | None = None,
) -> Iterator[LocalCluster]:
    """A local cluster on free ports with ``corpus`` ingested into ``collection``;
    stopped on exit. ``file`` is the settings file's values (under the environment's).
    Raises ClusterError (a child died or never got ready) and FileNotFoundError (no
    model, no corpus)."""
    if not (model_dir / "groundwire-model.json").exists():
        raise FileNotFoundError(
            f"no model in {model_dir}: run `groundwire models build minilm --out {model_dir}` "
            "first (or `make model`)"
        )
    cluster = LocalCluster.with_free_ports(run_dir, model_dir, data_path, extra_env, file)
    print(f"starting the local cluster (logs in {run_dir / 'logs'})…", flush=True)
    with cluster:
        cluster.start()
        cluster.wait_ready()
        print(f"cluster up at {cluster.gateway_url}", flush=True)
        ingest_corpus(cluster.addr("retriever"), collection, corpus)
        yield cluster


def stage_line(stages: Sequence[Stage] | Sequence[Mapping[str, Any]]) -> str:
    """``name Nms (fallback: reason)`` for each stage, joined by ``; ``."""
    notes = []
    for s in stages:
        if isinstance(s, Stage):
            name, ms, fallback, reason = s.name, s.ms, s.fallback, s.reason
        else:
            name, ms, fallback, reason = s["name"], s["ms"], s["fallback"], s.get("reason", "")
        notes.append(f"{name} {ms:.0f}ms" + (f" (fallback: {reason})" if fallback else ""))
    return "; ".join(notes)


def print_search(query: str, body: Mapping[str, Any]) -> None:
    print(f"\n? {query}")
    for r in body.get("results", []):
        path = " > ".join(r["heading_path"]) or r["title"]
        print(f"  {r['rank']}. [{r['score']:.3f}] {path}")
        print(f"     source: {r['url'] or r['source_id']}")
    print(f"  stages: {stage_line(body.get('stages', []))}")


def unverified(outcome: ChatOutcome) -> list[str]:
    """Why the answer's citations are not all verbatim quotes or supported ([] when
    they are). Only an extractive answer is held to it: it quotes its sources, so a
    citation that is neither is a bug, while a generated answer's unsupported citation
    is a finding the stream reports."""
    if outcome.error is not None:
        return [f"the chat failed: {outcome.error.code}: {outcome.error.message}"]
    if outcome.mode != "extractive":
        return []
    if not outcome.citations:
        return ["the extractive answer cites nothing"]
    return [
        f"[{c.number}] is {c.status} (score {c.support:.2f}): {c.sentence}"
        for c in outcome.citations
        if c.status not in (SUPPORTED, QUOTED)
    ]


def answer_lines(answer: str, width: int) -> list[str]:
    """The answer wrapped to ``width``, its own line breaks kept: a quoted list item or
    code block stays on lines of its own; lines of a fenced block are never wrapped."""
    lines: list[str] = []
    in_fence = False
    for raw in answer.splitlines():
        if raw.lstrip().startswith("```"):
            in_fence = not in_fence
            lines.append(raw)
        elif in_fence or not raw.strip():
            lines.append(raw)
        else:
            lines.extend(textwrap.wrap(raw, width=width, break_on_hyphens=False))
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def print_answer(question: str, outcome: ChatOutcome) -> None:
    """The answer, its citations and sources, the mode and the stages, as the demo
    prints them."""
    print(f"\n?? {question}  (POST /v1/chat)")
    if outcome.error is not None:
        where = f" ({outcome.error.dependency})" if outcome.error.dependency else ""
        print(f"  error{where}: {outcome.error.code}: {outcome.error.message}")
        return
    mode = outcome.mode or "unspecified"
    print(f"  mode: {MODE_LABELS.get(mode, mode.upper())}")
    print("  answer:")
    for line in answer_lines(outcome.answer, width=92) or ["(empty)"]:
        print(f"    {line}")
    if outcome.cited:
        print("  cited sources:")
        for s in outcome.cited:
            path = " > ".join(s.heading_path) or s.title
            flag = "  [flagged: possible prompt injection]" if s.injection_flagged else ""
            if s.live:  # not from the collection: fetched from its documentation site
                fetched = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s.fetched_at))
                flag += f"  [live, fetched {fetched}]"
            print(f"    [{s.number}] {path}{flag}")
            print(f"        {s.url or s.source_id}  ({s.source_id})")
    if outcome.citations:
        checked = any(c.method in MEANING_METHODS for c in outcome.citations)
        print(
            "  citations (each checked against the chunk it cites, by the method named):"
            if checked
            else "  citations (passages chosen by similarity; nothing read their meaning):"
        )
        for c in outcome.citations:
            sentence = textwrap.shorten(c.sentence, width=64, placeholder="…")
            if c.status == QUOTED:
                # a verbatim quote scores ~1.00 against its own passage by construction:
                # the figure would say nothing (#32)
                judged = "verbatim"
            else:
                method = c.method if c.method in MEANING_METHODS else "relevance"
                judged = f"{method} {c.support:.2f}"
            print(f"    [{c.number}] {c.status.upper():<11} {judged:<15} {sentence}")
    print("  stages:")
    for stage in outcome.stages:
        note = f"fallback: {stage.reason}" if stage.fallback else ""
        print(f"    {stage.name:<12} {stage.ms:6.0f}ms  {note}".rstrip())
    if outcome.citations:
        print(f"  {checked_line(outcome.citations)}")


def checked_line(citations: Sequence[Citation]) -> str:
    """What was checked, in one line: "verified: N of M citations supported" only when
    a method that reads meaning (nli, llm) judged them; otherwise that the answer is a
    set of quoted passages chosen by similarity (issue #32: a verbatim quote scores
    ~1.0 against its own passage, which proves nothing about the answer)."""
    judged = [c for c in citations if c.method in MEANING_METHODS]
    rest = len(citations) - len(judged)
    if judged:
        supported = sum(c.status == SUPPORTED for c in judged)
        methods = "/".join(dict.fromkeys(c.method for c in judged))
        line = f"verified: {supported} of {len(judged)} citations supported (by {methods})"
        return line + (f"; {rest} scored by similarity only, not checked" if rest else "")
    quoted = sum(c.status == QUOTED for c in citations)
    if quoted == len(citations):
        return (
            f"not checked for meaning: the answer is {quoted} passage(s) quoted from the "
            "sources, chosen by similarity to the question"
        )
    return (
        f"not checked for meaning: {len(citations)} citation(s) scored by similarity only "
        "(a relevance score, not proof)"
    )


def run_demo(
    gateway_url: str,
    *,
    collection: str,
    searches: Sequence[str],
    chats: Sequence[str],
    limit: int,
    timeout_s: float = 120.0,
) -> int:
    """Searches, then chats, against a running gateway; the exit code (1 when a search
    or chat fails, or a citation of an extractive answer does not verify)."""
    problems: list[str] = []
    answered: list[ChatOutcome] = []
    with httpx.Client(base_url=gateway_url, timeout=timeout_s) as client:
        for query in searches:
            reply = client.post(
                "/v1/search", json={"query": query, "collection": collection, "limit": limit}
            )
            if reply.status_code != 200:
                print(f"error: search failed ({reply.status_code}): {reply.text}", file=sys.stderr)
                return 1
            print_search(query, reply.json())
        for question in chats:
            try:
                outcome = ask(client, question, collection=collection)
            except (ChatRequestError, ChatProtocolError, httpx.HTTPError) as error:
                print(f"error: chat failed: {error}", file=sys.stderr)
                return 1
            print_answer(question, outcome)
            answered.append(outcome)
            problems += unverified(outcome)
    if answered:
        modes = ", ".join(sorted({(o.mode or "none").upper() for o in answered}))
        every = [c for o in answered for c in o.citations]
        summary = checked_line(every) if every else "no citations"
        print(f"\n{len(answered)} answers ({modes}): {summary}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's own options (the cluster's --model-dir, --data-path and --run-dir are
    added by the caller)."""
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument(
        "--collection",
        default=DEMO_COLLECTION,
        help="where the samples go (default: %(default)s; never `ingest`'s default, docs, "
        "so a later ingest of your own documents does not answer from the samples)",
    )
    parser.add_argument("--limit", type=int, default=3, help="search results per question")
    parser.add_argument(
        "--chat",
        type=int,
        default=2,
        metavar="N",
        help="ask the first N questions through /v1/chat too (default: %(default)s)",
    )


def run_command(args: argparse.Namespace) -> int:
    """`groundwire demo`: returns the exit code."""
    questions = read_questions(args.questions)
    try:
        with serving_corpus(
            model_dir=args.model_dir,
            run_dir=args.run_dir,
            data_path=args.data_path,
            corpus=args.corpus,
            collection=args.collection,
            file=getattr(args, "file_settings", None),
        ) as cluster:
            return run_demo(
                cluster.gateway_url,
                collection=args.collection,
                searches=questions,
                chats=questions[: max(0, args.chat)],
                limit=args.limit,
            )
    except (ClusterError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
