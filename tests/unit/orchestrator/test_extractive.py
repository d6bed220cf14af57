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
    assert cite("No stop", 3) == "No stop [3]."


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
