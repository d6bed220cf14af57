"""The extractive answer: best-matching sentences quoted and cited."""

from __future__ import annotations

from groundwire_orchestrator.domain import NumberedSource
from groundwire_orchestrator.stages.extractive import ExtractiveAnswerStage, ExtractiveInput, cite
from tests.unit.orchestrator.doubles import FakeEmbedder, chunk

SOURCES = [
    NumberedSource(
        1,
        chunk(
            1,
            "## Setup\n\nInstall the package first. Rate limits are "
            "enforced per API key by the gateway.\n\n```bash\nmake up\n```",
        ),
    ),
    NumberedSource(
        2,
        chunk(
            2,
            "Quotas reset at midnight for every API key.\n"
            "- Each key may send sixty requests\n  per minute to the API.",
        ),
    ),
    NumberedSource(3, chunk(3, "Spaghetti cooks in nine minutes in salted water.")),
]


def test_cite_puts_the_marker_before_the_final_punctuation() -> None:
    assert cite("Keys are limited.", 2) == "Keys are limited [2]."
    assert cite('He said "stop."', 1) == 'He said "stop [1]."'
    assert cite("No stop", 3) == "No stop [3]"


async def test_best_sentences_are_quoted_with_their_numbers() -> None:
    stage = ExtractiveAnswerStage(FakeEmbedder(), max_sentences=2)
    text, report = await stage.run(
        ExtractiveInput("how many requests per minute may an API key send", SOURCES, "no LLM")
    )
    assert "Each key may send sixty requests per minute to the API [2]." in text
    assert "Spaghetti" not in text and "make up" not in text
    assert report.name == "answer" and report.fallback and report.reason == "no LLM"
    assert report.details["mode"] == "extractive" and report.details["sentences"] == "2"
    assert report.details["scoring"] == "embedder + word overlap"


async def test_embedder_down_scores_by_word_overlap() -> None:
    stage = ExtractiveAnswerStage(FakeEmbedder(down=True), max_sentences=1)
    text, report = await stage.run(ExtractiveInput("spaghetti minutes", SOURCES, "no LLM"))
    assert text == "Spaghetti cooks in nine minutes in salted water [3]."
    assert report.details["scoring"].startswith("word overlap (embedder unavailable")


async def test_no_usable_sentence_gives_no_answer() -> None:
    stage = ExtractiveAnswerStage(FakeEmbedder())
    text, report = await stage.run(
        ExtractiveInput("q", [NumberedSource(1, chunk(1, "```\ncode only\n```"))], "no LLM")
    )
    assert text == "" and report.details["sentences"] == "0"


async def test_nothing_is_quoted_when_even_the_best_sentence_is_a_weak_match() -> None:
    question = ExtractiveInput("how tall is mount everest", SOURCES, "no LLM")
    text, report = await ExtractiveAnswerStage(FakeEmbedder(), min_score=0.2).run(question)
    assert text == ""
    assert report.details["sentences"] == "0"
    assert float(report.details["best_score"]) < 0.2
    assert "< 0.2" in report.details["declined"]
    # the floor is what declines: without it the same sentences are quoted
    text, report = await ExtractiveAnswerStage(FakeEmbedder(), min_score=0.0).run(question)
    assert text and "declined" not in report.details


async def test_a_good_match_clears_the_floor_and_reports_its_scores() -> None:
    question = ExtractiveInput("how many requests per minute may an API key send", SOURCES, "")
    text, report = await ExtractiveAnswerStage(FakeEmbedder(), min_score=0.2).run(question)
    assert "sixty requests" in text
    scores = [float(x) for x in report.details["scores"].split(", ")]
    assert len(scores) == int(report.details["sentences"]) and max(scores) >= 0.2
    assert max(scores) == float(report.details["best_score"])


async def test_without_the_embedder_the_floor_does_not_apply() -> None:
    # word-overlap scores are on another scale: the floor is for embedder scoring only
    question = ExtractiveInput("spaghetti in salted water for dinner", SOURCES, "")
    text, report = await ExtractiveAnswerStage(FakeEmbedder(down=True), min_score=0.99).run(
        question
    )
    assert "Spaghetti cooks" in text
    assert report.details["scoring"].startswith("word overlap")


async def test_a_weak_sentence_is_not_quoted_beside_a_good_one() -> None:
    sources = [
        NumberedSource(1, chunk(1, "Each key may send sixty requests per minute to the API.")),
        NumberedSource(2, chunk(2, "Spaghetti cooks in nine minutes in salted water.")),
    ]
    question = ExtractiveInput("how many requests per minute may an API key send", sources, "")
    text, report = await ExtractiveAnswerStage(FakeEmbedder()).run(question)
    assert "Spaghetti" in text, "without a floor a free slot takes whatever is left"
    weak, strong = sorted(float(x) for x in report.details["scores"].split(", "))
    floor = (weak + strong) / 2
    text, report = await ExtractiveAnswerStage(FakeEmbedder(), min_score=floor).run(question)
    assert text == "Each key may send sixty requests per minute to the API [1]."
    assert report.details["scores"] == f"{strong:.3f}"
