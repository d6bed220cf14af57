"""What a load run feeds the stack: the MiniLM model, the sample corpus, the questions
and a tiny random reranker."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "samples" / "corpus"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def ensure_minilm(model_dir: Path) -> Path:
    """The MiniLM ONNX folder, built (offline, ~10 s) when it is missing."""
    if not (model_dir / "groundwire-model.json").exists():
        from groundwire_embedder.export import build_profile

        print(f"building MiniLM into {model_dir}", flush=True)
        build_profile("minilm", model_dir, log=lambda _line: None)
    return model_dir


def corpus_sentences(limit: int = 400) -> list[str]:
    out: list[str] = []
    for path in sorted(CORPUS.glob("*.md")):
        body = path.read_text(encoding="utf-8")
        if body.startswith("---"):  # front matter
            body = body.split("\n---", 2)[-1]
        text = " ".join(
            ln
            for ln in body.splitlines()
            if ln.strip() and not ln.startswith(("#", "```", "|", "---"))
        )
        out.extend(s for s in _SENTENCE.split(text) if len(s.split()) >= 4)
    return out[:limit]


def sample_questions() -> list[str]:
    """The demo's questions (``samples/questions.txt``) and the corpus' headings as
    questions: short texts, shaped like queries."""
    lines = (ROOT / "samples" / "questions.txt").read_text(encoding="utf-8").splitlines()
    out = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    for path in sorted(CORPUS.glob("*.md")):
        out.extend(
            f"what does the documentation say about {ln.lstrip('#').strip().lower()}"
            for ln in path.read_text(encoding="utf-8").splitlines()
            if ln.startswith("## ")
        )
    return out


def build_tiny_reranker(run_dir: Path) -> Path:
    """A tiny random BERT cross-encoder as an ONNX reranker folder (mechanics only)."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint("bert", run_dir / "tiny-reranker-checkpoint", corpus_sentences())
    out = run_dir / "tiny-reranker"
    build_profile("cross-encoder", out, source=checkpoint, log=lambda _line: None)
    return out


def corpus_passages(words: int, count: int) -> list[str]:
    """``count`` texts of ``words`` words each, cut from the corpus' sentences."""
    sentences = corpus_sentences(2000)
    out: list[str] = []
    i = 0
    while len(out) < count:
        chosen: list[str] = []
        while len(chosen) < words:
            chosen.extend(sentences[i % len(sentences)].split())
            i += 1
        out.append(" ".join(chosen[:words]))
    return out
