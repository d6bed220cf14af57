"""Golden sets: YAML loading and validation, and the committed set over the sample
corpus (its source ids exist, and it has every kind of case the issue asks for)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from groundwire_cli import golden
from groundwire_cli.cluster import free_port
from groundwire_cli.golden import GoldenError, load_golden, parse_golden

COMMITTED = Path(__file__).resolve().parents[3] / "evals" / "golden" / "sample-corpus.yaml"
CORPUS = COMMITTED.parents[2] / "samples" / "corpus"


def test_a_minimal_set_loads_with_its_defaults() -> None:
    g = parse_golden(
        "cases:\n  - id: a\n    question: q?\n    cites: [x.md]\n", default_name="mine"
    )
    assert g.name == "mine" and g.collection is None
    [c] = g.cases
    assert (c.id, c.question, c.cites, c.llm_only, c.max_agent_steps) == (
        "a",
        "q?",
        ["x.md"],
        False,
        0,
    )
    assert c.required_share is None and c.expected() == {"cites": ["x.md"]}


def test_min_supported_true_means_every_citation() -> None:
    g = parse_golden(
        "cases:\n"
        "  - {id: a, question: q, min_supported: true}\n"
        "  - {id: b, question: q, min_supported: 0.75}\n"
        "  - {id: c, question: q, min_supported: false, forbids: [x]}\n"
    )
    assert [c.required_share for c in g.cases] == [1.0, 0.75, None]


def test_top_level_x_keys_hold_anchors_and_are_ignored() -> None:
    g = parse_golden(
        "x-words: &words [alpha, beta]\ncases:\n  - {id: a, question: q, forbids: *words}\n"
    )
    assert g.cases[0].forbids == ["alpha", "beta"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cases: []", "cases: List should have at least 1 item"),
        ("- {id: a}", "expected a mapping with 'cases'"),
        ("cases: [{id: a, question: q, cites: [x", "not YAML"),
        ("cases:\n  - {id: a, question: q, cite: [x.md]}", "case 1 ('a'): cite: Extra inputs"),
        ("cases:\n  - {id: a, question: q}", "case 1 ('a'): Value error, no check"),
        ("cases:\n  - {id: a, question: '  ', forbids: [x]}", "the question is blank"),
        (
            "cases:\n  - {id: a, question: q, refuses: true, cites: [x.md]}",
            "'refuses: true' contradicts",
        ),
        (
            "cases:\n  - {id: a, question: q, forbids: [x]}\n"
            "  - {id: a, question: r, forbids: [y]}",
            "two cases have the id 'a'",
        ),
        ("cases:\n  - {id: a, question: q, min_supported: 1.5}", "share between 0 and 1"),
        ("cases:\n  - {id: a, question: q, refuses: 'no way'}", "refuses: Input should be a valid"),
        ("cases:\n  - {id: a, question: q, forbids: ['']}", "non-empty strings"),
        ("cases:\n  - {id: 'a b', question: q, forbids: [x]}", "id: String should match"),
        (
            "cases:\n  - {id: a, question: q, forbids: [x]}\n  - {id: b, question: q, cites: []}",
            "case 2 ('b'): cites: List should have at least 1 item",
        ),
    ],
)
def test_invalid_sets_are_refused_naming_the_case_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(GoldenError, match=r"^<golden>: ") as caught:
        parse_golden(text)
    assert message in str(caught.value)


def test_a_missing_file_is_a_golden_error(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match=r"nope\.yaml"):
        load_golden(tmp_path / "nope.yaml")


def test_the_command_exits_2_on_a_bad_golden_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cases:\n  - {id: a, question: q}\n")
    parser = argparse.ArgumentParser()
    golden.add_arguments(parser)
    args = parser.parse_args(["--golden", str(bad), "--gateway", "http://127.0.0.1:9"])
    assert golden.run_command(args) == 2
    assert "no check" in capsys.readouterr().err
    assert not (tmp_path / "answers-bad.json").exists()


def test_a_gateway_that_does_not_answer_stops_the_run_before_any_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens on it
    out = tmp_path / "answers.json"
    parser = argparse.ArgumentParser()
    golden.add_arguments(parser)
    args = parser.parse_args(
        ["--golden", "evals/golden/sample-corpus.yaml", "--gateway", f"http://127.0.0.1:{port}/"]
    )
    args.out = out
    assert golden.run_command(args) == 1
    captured = capsys.readouterr()
    assert f"no gateway answers at http://127.0.0.1:{port} (ConnectError" in captured.err
    assert "cases against" not in captured.out, "no case was asked"
    assert not out.exists() and not out.with_suffix(".md").exists()


# ----------------------------------------------------------------- the committed set


def test_the_committed_set_loads_and_cites_only_real_sources() -> None:
    g = load_golden(COMMITTED)
    assert g.name == "sample-corpus" and g.collection == "docs"
    assert 18 <= len(g.cases) <= 30
    corpus = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.md")}
    cited = {s for c in g.cases for s in (*(c.cites or ()), *(c.cites_any or ()))}
    assert cited and cited <= corpus, cited - corpus


def test_the_committed_set_has_every_kind_of_case() -> None:
    cases = load_golden(COMMITTED).cases
    in_scope = [c for c in cases if c.cites and not c.llm_only]
    refusals = [c for c in cases if c.refuses or c.declines]
    assert len(in_scope) >= 6
    assert all(c.required_share == 1.0 or c.no_unsupported for c in in_scope)
    # out-of-scope and bait cases carry forbids as well as the decline
    assert len(refusals) >= 7 and all(c.forbids for c in refusals)
    assert all(c.declines for c in refusals), "judged offline too, not n/a"
    assert any("$" in (c.forbids or ()) for c in refusals)  # hallucination bait on prices
    # answers must state what was asked, and some answers are code
    assert sum(bool(c.contains) for c in in_scope) >= 6
    assert sum(c.id.startswith("code-") and bool(c.contains) for c in cases) >= 3
    injection = [c for c in cases if c.flags_injection]
    assert injection and "security.md" in (injection[0].cites or ())
    assert any(c.uses_tool and c.max_agent_steps for c in cases)


def test_the_committed_in_scope_questions_avoid_their_documents_key_words() -> None:
    # paraphrased on purpose: a question that names the document's subject tests nothing
    key_words = {
        "rate-limits.md": ["rate limit", "quota"],
        "degradation.md": ["fallback", "degrad"],
        "ingestion.md": ["chunk", "ingest"],
        "observability.md": ["trace", "latency", "stage"],
        "hybrid-retrieval.md": ["bm25", "dense", "fusion", "hybrid"],
        "citations.md": ["citation", "verif"],
    }
    cases = load_golden(COMMITTED).cases
    for c in cases:
        for source in c.cites or ():
            for word in key_words.get(source, []):
                assert word not in c.question.lower(), (c.id, word)
    assert {s for c in cases for s in (c.cites or ())} >= set(key_words)
