"""What the fault matrix uses besides the five services (and ``tests.redis_server``,
``tests.fakes.llm_thread``): the fake model's answer to each role as a real model
would give it, a tiny cross-encoder for the reranker, and readers for the gateway's
SSE and health."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.fakes.llm_server import RecordedRequest, Reply, judge_reply

T = TypeVar("T")

FAST_MODEL = "fake-fast"
STRONG_MODEL = "fake-strong"

_QUERY = re.compile(r"<query>\s*(.*?)\s*</query>", re.S)


def role_reply(request: RecordedRequest) -> Reply:
    """What a model would answer: the fast model (analysis) returns the analysis JSON
    with the query unchanged, so retrieval matches a run without an LLM; the strong
    model answers in one sentence citing excerpt [1]."""
    body = request.body
    system = body.get("system", "")
    system = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    if "You check claims against the passages" in system:  # the citation judge
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
        return Reply(text=judge_reply(text))
    if body.get("model") == FAST_MODEL:
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
        match = _QUERY.search(text)
        query = match.group(1) if match else text
        return Reply(
            json={
                "rewritten_query": query,
                "hyde_document": query,
                "intent": "find the answer",
                "filters": [],
                "negatives": [],
            }
        )
    return Reply(text="According to the documentation, it takes about nine minutes [1].")


def corpus_sentences(repo_root: Path) -> list[str]:
    """Sentences of our own docs: the tiny reranker's tokenizer training text."""
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in sorted((repo_root / "samples" / "corpus").glob("*.md"))
    )
    sentences = [s.strip(" #*-`>|") for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in sentences if len(s) > 20]


def build_tiny_reranker(repo_root: Path, workdir: Path) -> Path:
    """A random two-layer BERT cross-encoder exported by the project's build command
    (real serving mechanics, meaningless scores). Returns the model folder."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint("bert", workdir / "checkpoint", corpus_sentences(repo_root))
    report = build_profile(
        "cross-encoder", workdir / "model", source=checkpoint, log=lambda _: None
    )
    return Path(report.out_dir)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each event in a text/event-stream body."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def eventually(
    probe: Callable[[], T], done: Callable[[T], bool], *, timeout_s: float, every_s: float = 0.2
) -> T:
    """Calls ``probe`` until ``done`` accepts its value or ``timeout_s`` passes; returns
    the last value either way (the caller asserts on it, so a failure shows it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(every_s)
