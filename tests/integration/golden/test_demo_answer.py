"""`groundwire demo` offline (issue 5, acceptance 1): on a real local cluster with no
API key it asks a question through POST /v1/chat and prints an extractive, cited
answer whose every citation verifies, with the analysis and answer fallbacks."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from groundwire_cli import demo

pytestmark = pytest.mark.e2e


def test_the_demo_prints_a_verified_extractive_answer_with_its_fallbacks(
    minilm_dir: Path,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two pages of the corpus only: the coverage stage's evidence (the share of the
    # question's words the top chunks contain) was calibrated on whole collections, and
    # "API" and "flooding" are in neither page (the whole corpus answers it: golden set)
    monkeypatch.setenv("GROUNDWIRE_ORCHESTRATOR_DECLINE_THRESHOLD", "0")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("rate-limits.md", "degradation.md"):
        shutil.copy(repo_root / "samples" / "corpus" / name, corpus / name)
    questions = tmp_path / "questions.txt"
    questions.write_text("# one search, one chat\nhow do I stop one user from flooding the API\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", type=Path)
    parser.add_argument("--data-path", type=Path)
    parser.add_argument("--run-dir", type=Path)
    demo.add_arguments(parser)
    args = parser.parse_args(
        [
            "--model-dir",
            str(minilm_dir),
            "--data-path",
            str(tmp_path / "qdrant"),
            "--run-dir",
            str(tmp_path / "run"),
            "--corpus",
            str(corpus),
            "--questions",
            str(questions),
            "--chat",
            "1",
        ]
    )

    code = demo.run_command(args)

    out = capsys.readouterr().out
    assert code == 0, out
    search, _, chat = out.partition("(POST /v1/chat)")
    assert "1. [" in search and "source: https://groundwire.dev/docs/rate-limits" in search
    assert "mode: EXTRACTIVE" in chat
    answer = chat.split("answer:", 1)[1].split("cited sources:", 1)[0]
    assert re.search(r"\[\d+\]", answer), answer
    assert "(rate-limits.md)" in chat
    # the answer opens with the page that answers (#32: it opened with the security
    # summary, which shares "API" and "user" with the question and answers nothing)
    files = dict(re.findall(r"^\s+\[(\d+)\] .+\n\s+\S+\s+\((\S+)\)$", chat, flags=re.MULTILINE))
    first = re.search(r"\[(\d+)\]", answer)
    assert first and files.get(first.group(1)) == "rate-limits.md", chat
    assert "rate limit" in answer.lower(), answer
    statuses = re.findall(r"^\s+\[\d+\] ([A-Z]+)\s+verbatim ", chat, flags=re.MULTILINE)
    assert statuses and set(statuses) == {"QUOTED"}, "verbatim quotes; nothing judged"
    assert "1.00" not in chat, "no by-construction similarity shown for a quote"
    assert re.search(r"analysis +\d+ms +fallback: no LLM is configured", chat)
    assert re.search(r"answer +\d+ms +fallback: no LLM is configured: extractive answer", chat)
    assert f"the answer is {len(statuses)} passage(s) quoted from the sources" in chat
    assert not re.search(r"\b(verified|supported)\b", chat, re.IGNORECASE), chat
