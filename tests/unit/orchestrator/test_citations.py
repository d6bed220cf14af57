"""Citation numbering, the streaming marker filter, parsing and the support check."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

from groundwire_orchestrator.domain import Citation, NumberedSource, StageReport, Verification
from groundwire_orchestrator.stages.citations import (
    CitationVerifier,
    VerificationInput,
    cited_sentences,
)
from groundwire_orchestrator.text.ledger import CitationFilter, SourceLedger, clean_markers
from groundwire_orchestrator.text.prompting import is_decline
from groundwire_orchestrator.text.sentences import marker_numbers, split_sentences, strip_markers
from tests.unit.orchestrator.doubles import FakeEmbedder, chunk


class _Verified(NamedTuple):
    citations: tuple[Citation, ...]
    report: StageReport


async def _verify(
    verifier: CitationVerifier, text: str, sources: Callable[[int], NumberedSource | None]
) -> _Verified:
    return _Verified(*await verifier.run(VerificationInput(text, sources)))


def test_ledger_is_append_only_and_keeps_first_numbers() -> None:
    ledger = SourceLedger()
    first = ledger.add([chunk(1, "a"), chunk(2, "b")])
    assert [s.number for s in first] == [1, 2]
    again = ledger.add([chunk(2, "b"), chunk(3, "c"), chunk(1, "a")])
    assert [(s.number, s.candidate.chunk_id) for s in again] == [(3, "c3")]
    assert ledger.number_of("c2") == 2 and ledger.get(3) is not None
    assert 4 not in ledger and len(ledger) == 3


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Limits apply per key [1].", [1]),
        ("Both hold [1][2].", [1, 2]),
        ("Both hold [1, 2].", [1, 2]),
        ("Spaced [ 3 ,4 ] too.", [3, 4]),
        ("A [link](https://x) is not one.", []),
    ],
)
def test_marker_numbers(text: str, numbers: list[int]) -> None:
    assert marker_numbers(text) == numbers


def test_sentences_keep_markers_after_the_full_stop() -> None:
    text = "Rate limits reset hourly. [1] Quotas reset daily [2].\n- a list item [3]\nEnd."
    assert split_sentences(text) == [
        "Rate limits reset hourly. [1]",
        "Quotas reset daily [2].",
        "- a list item [3]",
        "End.",
    ]
    assert strip_markers("- **Quotas** reset daily [2] .") == "Quotas reset daily."
    assert strip_markers("Set `LOG_JSON` to _true_ [1].") == "Set LOG_JSON to true."


def test_cited_sentences_dedupe_numbers_per_sentence() -> None:
    found = cited_sentences("One [1][1]. Two [1, 2]. No citation here.")
    assert [(c.claim, c.numbers) for c in found] == [("One.", (1,)), ("Two.", (1, 2))]


def test_filter_drops_out_of_range_markers_even_split_across_deltas() -> None:
    flt = CitationFilter(lambda n: n <= 5)
    pieces = ["Keys are limited ", "[", "7", "]. Quotas reset daily [2", ", 9]", " and [", "3]."]
    shown = "".join(flt.feed(p) for p in pieces) + flt.flush()
    assert shown == "Keys are limited. Quotas reset daily [2] and [3]."
    assert flt.dropped == [7, 9]


def test_filter_passes_brackets_that_are_not_markers_promptly() -> None:
    flt = CitationFilter(lambda n: True)
    assert flt.feed("see [the guide](x) ") == "see [the guide](x)"
    assert flt.feed("now") == " now"
    assert flt.flush() == ""


def test_clean_markers_on_whole_text() -> None:
    text, dropped = clean_markers("A [1]. B [7]. C [1, 7].", lambda n: n == 1)
    assert text == "A [1]. B. C [1]."
    assert dropped == [7, 7]


@pytest.mark.parametrize(
    ("text", "declined"),
    [
        ("I can't answer that from the available documents: nothing on pricing.", True),
        ("I cannot find that in the excerpts.", True),
        ("The documents don't cover billing.", True),
        ("Rate limits are per key [1].", False),
    ],
)
def test_is_decline(text: str, declined: bool) -> None:
    assert is_decline(text) is declined


SOURCES = {
    1: chunk(1, "Rate limits are enforced per API key. Each key may send 60 requests a minute."),
    2: chunk(2, "Boil the spaghetti in salted water for nine minutes until al dente."),
}


def _get(n: int):  # type: ignore[no-untyped-def]
    from groundwire_orchestrator.domain import NumberedSource

    return NumberedSource(n, SOURCES[n]) if n in SOURCES else None


async def test_verifier_flags_the_citation_whose_chunk_does_not_support_its_sentence() -> None:
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5)
    text = "Each API key may send 60 requests a minute [1]. Rate limits are enforced per key [2]."
    result = await _verify(verifier, text, _get)
    by_number = {c.number: c for c in result.citations}
    # similarity reads no meaning: close or far, never supported or unsupported
    assert by_number[1].status is Verification.SIMILAR and by_number[1].support >= 0.5
    assert by_number[2].status is Verification.UNRELATED and by_number[2].support < 0.5
    assert result.report.details["unrelated"] == "1"
    assert "supported" not in result.report.details, "no zero count of a status never given"
    assert result.report.fallback is False


async def test_verifier_marks_unchecked_when_the_embedder_is_down() -> None:
    verifier = CitationVerifier(FakeEmbedder(down=True), threshold=0.5)
    result = await _verify(verifier, "Keys are limited [1].", _get)
    assert [c.status for c in result.citations] == [Verification.UNCHECKED]
    assert result.report.fallback and result.report.dependency == "embedder"


async def test_verifier_skips_numbers_without_a_source() -> None:
    result = await _verify(CitationVerifier(FakeEmbedder(), threshold=0.5), "X [9].", _get)
    assert result.citations == ()


async def test_a_figure_the_chunk_only_implies_is_not_penalised() -> None:
    # the figure-halving rule rejected every supported claim it fired on (issue #21):
    # "sixty" against "60" is the same support as the words the chunk states
    sources = {1: chunk(1, "Each key may send sixty requests a minute.")}

    def get(n: int):  # type: ignore[no-untyped-def]
        from groundwire_orchestrator.domain import NumberedSource

        return NumberedSource(n, sources[n])

    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5)
    stated = await _verify(verifier, "Each key may send sixty requests a minute [1].", get)
    other = await _verify(verifier, "Each key may send 60 requests a minute [1].", get)
    assert stated.citations[0].support >= 0.9
    assert other.citations[0].support >= 0.75, "no halving for a figure the chunk lacks"
    assert other.citations[0].status is Verification.SIMILAR
    assert other.citations[0].method == "similarity"


async def test_a_verbatim_quote_is_checked_like_any_claim() -> None:
    # a quote proves the words exist, not that they support anything: with the
    # embedder down, the quote is unchecked like the paraphrase beside it
    embedder = FakeEmbedder(down=True)
    result = await _verify(
        CitationVerifier(embedder, threshold=0.5),
        "**Each key** may send 60 requests a minute [1]. Keys rotate weekly [1].",
        _get_quoted,
    )
    quote, other = result.citations
    assert quote.status is other.status is Verification.UNCHECKED
    assert result.report.details["verbatim"] == "1" and result.report.fallback
    assert result.report.dependency == "embedder"


async def test_citations_carry_spans_of_the_answer_and_the_chunk() -> None:
    verifier = CitationVerifier(FakeEmbedder(), threshold=0.5)
    text = "Limits, e.g. quotas, apply. Each API key may send 60 requests a minute [1]."
    result = await _verify(verifier, text, _get)
    (citation,) = result.citations
    assert citation.answer_span is not None and citation.source_span is not None
    start, end = citation.answer_span
    assert text[start:end] == citation.sentence == "Each API key may send 60 requests a minute [1]."
    chunk_text = SOURCES[1].text
    start, end = citation.source_span
    assert chunk_text[start:end] == "Each key may send 60 requests a minute."


def test_a_code_block_and_its_marker_line_are_one_cited_claim() -> None:
    text = "Install it [1].\n\n```bash\npip install x[2]\n```\n[2]"
    found = cited_sentences(text)
    assert [(c.numbers, c.quote) for c in found] == [
        ((1,), "Install it."),
        ((2,), "```bash\npip install x[2]\n```"),
    ]


def _get_quoted(n: int):  # type: ignore[no-untyped-def]
    from groundwire_orchestrator.domain import NumberedSource

    return NumberedSource(
        n, chunk(n, "Limits apply.\n\n- **Each key** may send 60 requests\n  a minute.")
    )
