"""Content words: stop words out, Snowball English stems, so a claim's words match a
chunk's inflections."""

from __future__ import annotations

from groundwire_orchestrator.text.sentences import content_words, overlap


def test_inflections_share_a_stem_and_stop_words_are_dropped() -> None:
    assert content_words("The limits were limited") == ["limit", "limit"]
    assert content_words("running runs, reranked queries") == ["run", "run", "rerank", "queri"]
    # the suffix stripper this replaced made "runn" of "running"
    assert content_words("running") == content_words("runs") == content_words("run")


def test_overlap_counts_stemmed_words() -> None:
    claim = content_words("Each key is limited to sixty requests")
    chunk = content_words("Rate limits: a key may send sixty requests a minute.")
    assert overlap(claim, chunk) == 1.0
    assert overlap(content_words("keys rotate weekly"), chunk) == 1 / 3


def test_abbreviations_and_initials_do_not_end_a_sentence() -> None:
    from groundwire_orchestrator.text.sentences import sentence_spans, split_sentences

    text = (
        "E. coli grows at 37 C [1]. It is common, e.g. in guts. See Fig. 2 for details. "
        "Smith et al. (2020) said so. Smith et al. The next one.\n3. Third item. J. R. Tolkien."
    )
    assert split_sentences(text) == [
        "E. coli grows at 37 C [1].",
        "It is common, e.g. in guts.",
        "See Fig. 2 for details.",
        "Smith et al. (2020) said so.",
        "Smith et al.",
        "The next one.",
        "3. Third item.",
        "J. R. Tolkien.",
    ]
    assert [text[s:e] for s, e in sentence_spans(text)] == split_sentences(text)
