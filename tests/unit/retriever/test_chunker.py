"""The section-aware chunker: heading paths, whole fences and tables, the token
budget, overlap, and the summary leading the first chunk."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from groundwire_retriever.ingest.chunker import (
    TextChunk,
    approx_tokens,
    chunk_document,
    chunk_document_counted,
)

DOC = """# Title

Intro paragraph.

## Section

Section text.

### Sub

Deep text.

## Other

Other text.
"""

CODE = """```python
def f():
    return 1


# not a heading
x = f()
```"""

TABLE = """| name | value |
|------|-------|
| a    | 1     |
| b    | 2     |"""


def _body(chunk: TextChunk) -> str:
    """The chunk text without its heading path line."""
    header = " > ".join(chunk.heading_path)
    assert chunk.text.startswith(f"{header}\n\n")
    return chunk.text[len(header) + 2 :]


def _words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_heading_paths() -> None:
    chunks = chunk_document("Title", DOC)
    assert [c.heading_path for c in chunks] == [
        ("Title",),
        ("Title", "Section"),
        ("Title", "Section", "Sub"),
        ("Title", "Other"),
    ]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert chunks[2].text == "Title > Section > Sub\n\nDeep text."
    assert chunks[3].text == "Title > Other\n\nOther text."


def test_title_is_prefixed_when_the_body_has_no_such_heading() -> None:
    chunks = chunk_document("Guide", "Lead in.\n\n## Install\n\nRun it.\n")
    assert [c.heading_path for c in chunks] == [("Guide",), ("Guide", "Install")]
    assert chunks[1].text.startswith("Guide > Install\n\n")


def test_closing_hashes_and_level_jumps() -> None:
    body = "# T\n\n### Deep ###\n\nd\n\n## Mid\n\nm\n"
    chunks = chunk_document("T", body)
    assert [c.heading_path for c in chunks] == [("T", "Deep"), ("T", "Mid")]


def test_hash_without_space_is_not_a_heading() -> None:
    chunks = chunk_document("T", "#hashtag is text\n")
    assert [c.heading_path for c in chunks] == [("T",)]
    assert _body(chunks[0]) == "#hashtag is text"


def test_without_a_title_there_is_no_prefix() -> None:
    chunks = chunk_document("", "plain text\n")
    assert chunks == [TextChunk(0, (), "plain text")]


def test_fenced_code_is_whole_and_not_a_heading() -> None:
    body = f"# Title\n\n## Code\n\nBefore.\n\n{CODE}\n\nAfter.\n"
    chunks = chunk_document("Title", body)
    assert [c.heading_path for c in chunks] == [("Title", "Code")]
    assert CODE in chunks[0].text
    assert "not a heading" not in " ".join(" ".join(c.heading_path) for c in chunks)


def test_fenced_code_is_never_split_across_chunks() -> None:
    before = _words("b", 45)  # 60 tokens
    body = f"{before}\n\n{CODE}\n\n{_words('a', 45)}\n"
    chunks = chunk_document("T", body, max_tokens=70, overlap_tokens=0)
    holding = [c for c in chunks if "def f():" in c.text]
    assert len(holding) == 1
    assert CODE in holding[0].text
    assert all(c.text.count("```") % 2 == 0 for c in chunks)


def test_tilde_fence_is_whole() -> None:
    fence = "~~~\n# inside\n\nstill inside\n~~~"
    chunks = chunk_document("T", f"{fence}\n\nafter\n")
    assert [c.heading_path for c in chunks] == [("T",)]
    assert fence in chunks[0].text


def test_longer_fence_is_closed_only_by_an_equal_or_longer_fence() -> None:
    # Markdown that shows Markdown wraps ``` blocks in a ```` fence.
    fence = "````markdown\n```python\n# not a heading\n```\n\n## Also not a heading\n````"
    chunks = chunk_document("Doc", f"# Doc\n\n{fence}\n\nafter\n")
    assert [c.heading_path for c in chunks] == [("Doc",)]
    assert fence in chunks[0].text


def test_unclosed_fence_runs_to_the_end() -> None:
    chunks = chunk_document("T", "```\ncode\n\n# not a heading\n")
    assert [c.heading_path for c in chunks] == [("T",)]
    assert "# not a heading" in chunks[0].text


def test_table_stays_in_one_chunk() -> None:
    before, after = _words("b", 16), _words("a", 16)  # 22 tokens each; the table too
    assert approx_tokens(TABLE) == 22
    body = f"{before}\n{TABLE}\n{after}\n"
    chunks = chunk_document("T", body, max_tokens=30, overlap_tokens=0)
    assert [_body(c) for c in chunks] == [before, TABLE, after]


def test_table_is_one_block_between_paragraphs() -> None:
    chunks = chunk_document("T", f"Before.\n{TABLE}\nAfter.\n")
    assert _body(chunks[0]) == f"Before.\n\n{TABLE}\n\nAfter."


@pytest.mark.parametrize("max_tokens", [20, 50, 120])
def test_max_tokens_is_respected(max_tokens: int) -> None:
    paragraphs = "\n\n".join(_words(f"p{j}w", 7 + 5 * (j % 4)) for j in range(30))
    long_paragraph = _words("long", 400)
    long_lines = "\n".join(_words(f"l{j}w", 12) for j in range(40))
    body = f"# T\n\n## A\n\n{paragraphs}\n\n## B\n\n{long_paragraph}\n\n## C\n\n{long_lines}\n"
    chunks = chunk_document("T", body, max_tokens=max_tokens, overlap_tokens=10)
    assert len(chunks) > 3
    for chunk in chunks:
        assert approx_tokens(_body(chunk)) <= max_tokens, chunk.text
    # nothing is lost: every word of the input is in some chunk
    words = set(body.split()) - {"#", "##"}
    assert words <= set(" ".join(c.text for c in chunks).split())


def test_overlap_carries_the_previous_block_when_small() -> None:
    first, small, third = _words("a", 30), _words("s", 6), _words("c", 30)  # 40, 8, 40
    body = f"{first}\n\n{small}\n\n{third}\n"
    chunks = chunk_document("T", body, max_tokens=50, overlap_tokens=10)
    assert [_body(c) for c in chunks] == [f"{first}\n\n{small}", f"{small}\n\n{third}"]


def test_overlap_drops_a_block_larger_than_the_overlap() -> None:
    first, second, third = _words("a", 20), _words("b", 20), _words("c", 20)  # 27 each
    body = f"{first}\n\n{second}\n\n{third}\n"
    chunks = chunk_document("T", body, max_tokens=60, overlap_tokens=10)
    assert [_body(c) for c in chunks] == [f"{first}\n\n{second}", third]


def test_no_overlap_when_disabled() -> None:
    first, small, third = _words("a", 30), _words("s", 6), _words("c", 30)
    chunks = chunk_document(
        "T", f"{first}\n\n{small}\n\n{third}\n", max_tokens=50, overlap_tokens=0
    )
    assert [_body(c) for c in chunks] == [f"{first}\n\n{small}", third]


def test_overlap_does_not_cross_sections() -> None:
    body = "# T\n\n## A\n\nshort a\n\n## B\n\nshort b\n"
    chunks = chunk_document("T", body, max_tokens=50, overlap_tokens=50)
    assert [_body(c) for c in chunks] == ["short a", "short b"]


def test_summary_leads_the_first_chunk_only() -> None:
    chunks = chunk_document("Title", DOC, summary="  What this is about.  ")
    assert _body(chunks[0]) == "What this is about.\n\nIntro paragraph."
    assert all("What this is about." not in c.text for c in chunks[1:])


def test_summary_leads_even_when_the_first_section_comes_late() -> None:
    chunks = chunk_document("T", "# T\n\n## A\n\nalpha\n", summary="Sum.")
    assert chunks[0].heading_path == ("T", "A")
    assert _body(chunks[0]) == "Sum.\n\nalpha"


def test_injected_token_counter_is_used() -> None:
    def chars(text: str) -> int:
        return len(text)

    body = "\n\n".join(["aaaa"] * 6)
    # by words (approx_tokens) all six fit in 10; by characters only two per chunk
    assert approx_tokens(body) <= 10
    chunks = chunk_document("", body, max_tokens=10, overlap_tokens=0, count=chars)
    assert [c.text for c in chunks] == ["aaaa\n\naaaa"] * 3


def test_empty_body_gives_no_chunks() -> None:
    assert chunk_document("T", "") == []
    assert chunk_document("T", "# T\n\n## Empty\n\n") == []


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("one", 2), ("one two", 3), ("one two three", 4)]
)
def test_approx_tokens(text: str, tokens: int) -> None:
    assert approx_tokens(text) == tokens


def test_a_leading_h1_is_the_title_but_later_h1s_are_sections() -> None:
    chunks = chunk_document(
        "Front Title", "# Doc H1\n\nintro\n\n## Sub\n\ntext\n\n# Part Two\n\nmore"
    )
    assert [c.heading_path for c in chunks] == [
        ("Front Title",),
        ("Front Title", "Sub"),
        ("Front Title", "Part Two"),
    ]


# -- merging small sections (min_tokens) ------------------------------------------


def words(text: str) -> int:
    """A counter that is exactly additive over whitespace joins: one token a word."""
    return len(text.split())


INSTALL = f"""# T

## Install

### Linux

{_words("l", 10)}

### Mac

{_words("m", 10)}

## Use

{_words("u", 10)}
"""


def test_small_sections_merge_under_their_common_parent_with_headings_kept() -> None:
    chunks = chunk_document("T", INSTALL, min_tokens=30, max_tokens=100, count=words)
    assert chunks == [
        TextChunk(
            0,
            ("T",),
            f"T\n\n## Install\n\n### Linux\n\n{_words('l', 10)}\n\n### Mac\n\n"
            f"{_words('m', 10)}\n\n## Use\n\n{_words('u', 10)}",
        )
    ]


def test_without_min_tokens_every_section_stays_apart() -> None:
    chunks = chunk_document("T", INSTALL, max_tokens=100, count=words)
    assert [c.heading_path for c in chunks] == [
        ("T", "Install", "Linux"),
        ("T", "Install", "Mac"),
        ("T", "Use"),
    ]


def test_a_family_is_merged_before_sections_across_parents() -> None:
    body = INSTALL.replace(_words("u", 10), _words("u", 25))
    chunks = chunk_document("T", body, min_tokens=20, max_tokens=100, count=words)
    # Linux + Mac (27 tokens with headings) reach the minimum under "Install";
    # "Use" (28) is big enough alone, so nothing crosses to the title level.
    assert [(c.heading_path, words(c.text)) for c in chunks] == [
        (("T", "Install"), 27),
        (("T", "Use"), 28),
    ]
    assert _body(chunks[0]) == f"### Linux\n\n{_words('l', 10)}\n\n### Mac\n\n{_words('m', 10)}"


def test_a_small_last_section_joins_the_group_before_it() -> None:
    body = f"# T\n\n## A\n\n{_words('a', 40)}\n\n## B\n\n{_words('b', 5)}\n"
    chunks = chunk_document("T", body, min_tokens=20, max_tokens=100, count=words)
    assert [c.heading_path for c in chunks] == [("T",)]
    assert _body(chunks[0]) == f"## A\n\n{_words('a', 40)}\n\n## B\n\n{_words('b', 5)}"


def test_merging_never_exceeds_max_tokens() -> None:
    body = f"# T\n\n## A\n\n{_words('a', 60)}\n\n## B\n\n{_words('b', 60)}\n"
    chunks = chunk_document("T", body, min_tokens=100, max_tokens=100, count=words)
    assert [c.heading_path for c in chunks] == [("T", "A"), ("T", "B")]
    assert all(words(c.text) <= 100 for c in chunks)


def test_a_section_needing_several_chunks_is_never_merged() -> None:
    long_b = "\n\n".join(_words(f"b{j}w", 30) for j in range(6))  # 180 tokens
    body = f"# T\n\n## A\n\n{_words('a', 3)}\n\n## B\n\n{long_b}\n"
    chunks = chunk_document("T", body, min_tokens=50, max_tokens=100, count=words)
    assert chunks[0].heading_path == ("T", "A")
    assert _body(chunks[0]) == _words("a", 3)
    assert {c.heading_path for c in chunks[1:]} == {("T", "B")}
    assert len(chunks) >= 3


def test_a_section_split_in_several_chunks_is_rebalanced_instead_of_leaving_a_stub() -> None:
    body = "\n\n".join(_words(f"p{j}w", 10) for j in range(9))  # nine 10-token paragraphs
    greedy = chunk_document("T", body, max_tokens=81, overlap_tokens=0, count=words)
    assert [words(_body(c)) for c in greedy] == [80, 10]
    balanced = chunk_document(
        "T", body, min_tokens=30, max_tokens=81, overlap_tokens=0, count=words
    )
    assert [words(_body(c)) for c in balanced] == [50, 40]
    assert " ".join(_body(c) for c in balanced).split() == body.split()


# -- cutting blocks larger than the budget ----------------------------------------


def test_an_oversized_code_block_is_cut_into_fenced_pieces() -> None:
    lines = [f"call_{i}(a, b)" for i in range(60)]  # 2 tokens a line
    code = "```python\n" + "\n".join(lines) + "\n```"
    chunks = chunk_document("T", code, max_tokens=50, overlap_tokens=0, count=words)
    # 50 less the path and the two fence lines leaves 47: 23 lines a piece
    assert len(chunks) == 3
    inner: list[str] = []
    for chunk in chunks:
        assert words(chunk.text) <= 50
        body = _body(chunk).split("\n")
        assert body[0] == "```python" and body[-1] == "```"
        inner += body[1:-1]
    assert inner == lines


def test_an_oversized_table_repeats_its_header_in_every_piece() -> None:
    rows = [f"| x{i} | y{i} |" for i in range(40)]  # 5 tokens a row
    table = "| a | b |\n|---|---|\n" + "\n".join(rows)
    chunks = chunk_document("T", table, max_tokens=60, overlap_tokens=0, count=words)
    assert len(chunks) >= 4
    seen: list[str] = []
    for chunk in chunks:
        assert words(chunk.text) <= 60
        body = _body(chunk).split("\n")
        assert body[:2] == ["| a | b |", "|---|---|"]
        seen += body[2:]
    assert seen == rows


def _wordpieces(text: str) -> int:
    """Like WordPiece: a word is a token, so is every punctuation mark ("-" included)."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def test_a_table_rule_of_many_dashes_is_repeated_short() -> None:
    # Node.js's encodings table: a 230-dash rule is ~240 tokens, over the budget alone;
    # repeated as written it left each piece one character of a row (2,317 chunks)
    rows = [f"| `'enc-{i}'`{' ' * 10} | `'alias-{i}'`, `'other-{i}'` |" for i in range(30)]
    table = f"| Encoding{' ' * 10} | Aliases{' ' * 200} |\n| {'-' * 18} | {'-' * 230} |\n"
    chunks = chunk_document("T", table + "\n".join(rows), max_tokens=120, overlap_tokens=0,
                            count=_wordpieces)
    assert 2 <= len(chunks) <= 10
    seen: list[str] = []
    for chunk in chunks:
        assert _wordpieces(chunk.text) <= 120
        body = _body(chunk).split("\n")
        assert body[:2] == ["| Encoding | Aliases |", "| --- | --- |"]
        seen += body[2:]
    assert seen == rows


def test_a_table_header_over_half_the_budget_is_not_repeated() -> None:
    header = "| " + " | ".join(f"c{i}" for i in range(30)) + " |"  # 61 tokens
    rule = "|" + "---|" * 30  # 1 token
    rows = ["| " + " | ".join(f"r{j}x{i}" for i in range(30)) + " |" for j in range(12)]
    chunks = chunk_document("T", "\n".join([header, rule, *rows]), max_tokens=100,
                            overlap_tokens=0, count=words)
    # repeated, the header would leave 37 tokens a piece: every row cut in two
    assert len(chunks) == 13  # the header once, then a row a chunk, each whole
    assert all(words(c.text) <= 100 for c in chunks)
    assert "\n".join(_body(c) for c in chunks).split("\n") == [header, rule, *rows]
    assert sum(_body(c).startswith(header) for c in chunks) == 1


def test_a_long_paragraph_is_cut_at_sentences_first() -> None:
    sentences = [f"{_words(f's{j}w', 9)} end." for j in range(12)]  # 10 tokens each
    chunks = chunk_document("T", " ".join(sentences), max_tokens=36, count=words)
    for chunk in chunks:
        assert words(chunk.text) <= 36
        assert _body(chunk).endswith("end.")  # cut between sentences, not inside one
    assert " ".join(_body(c) for c in chunks) == " ".join(sentences)


def test_a_huge_word_is_cut_by_characters() -> None:
    blob = "QUJD" * 1250  # 5000 characters, no whitespace (e.g. base64)
    chunks = chunk_document("T", blob, max_tokens=1000, count=len)
    assert len(chunks) >= 6
    assert all(len(c.text) <= 1000 for c in chunks)
    assert "".join(_body(c) for c in chunks) == blob


def test_the_heading_path_counts_towards_max_tokens() -> None:
    title = _words("t", 20)
    body = "\n\n".join(_words(f"p{j}w", 5) for j in range(8))
    chunks = chunk_document(title, body, max_tokens=30, overlap_tokens=0, count=words)
    assert [words(_body(c)) for c in chunks] == [10, 10, 10, 10]
    assert all(words(c.text) == 30 for c in chunks)


def test_a_counter_that_is_not_additive_still_never_exceeds_max_tokens() -> None:
    def separators_cost(text: str) -> int:  # every blank line costs three tokens
        return len(text.split()) + 3 * text.count("\n\n")

    body = "\n\n".join(_words(f"p{j}w", 8) for j in range(20))
    chunks = chunk_document("T", body, max_tokens=40, overlap_tokens=0, count=separators_cost)
    assert all(separators_cost(c.text) <= 40 for c in chunks)
    assert " ".join(_body(c) for c in chunks).split() == body.split()


def test_special_tokens_are_counted_once_per_chunk() -> None:
    def model(text: str) -> int:  # like a BERT tokenizer: [CLS] ... [SEP]
        return len(text.split()) + 2

    body = "\n\n".join(_words(f"p{j}w", 10) for j in range(6))
    chunks = chunk_document("T", body, max_tokens=33, overlap_tokens=0, count=model)
    # 33 - 2 special - 1 for the path "T" leaves 30: three paragraphs a chunk
    assert [words(_body(c)) for c in chunks] == [30, 30]
    assert all(model(c.text) == 33 for c in chunks)


# -- plain text and counting in batches -------------------------------------------


def test_plain_text_has_no_headings() -> None:
    body = "# not a heading\n\nsome text\n\n## nor this\n"
    chunks = chunk_document("notes", body, markdown=False)
    assert [c.heading_path for c in chunks] == [("notes",)]
    assert _body(chunks[0]) == "# not a heading\n\nsome text\n\n## nor this"


def test_a_very_long_heading_is_shortened_in_the_path() -> None:
    chunks = chunk_document("T", f"## {'x' * 500}\n\ntext\n")
    assert len(chunks[0].heading_path[1]) == 200
    assert chunks[0].heading_path[1].endswith("…")


async def test_batch_counter_gives_the_same_chunks_in_a_few_calls() -> None:
    batches: list[list[str]] = []

    async def count_tokens(texts: Sequence[str]) -> list[int]:
        batches.append(list(texts))
        return [words(t) for t in texts]

    body = DOC + "\n\n" + "\n\n".join(_words(f"p{j}w", 12) for j in range(30))
    expected = chunk_document("Title", body, max_tokens=60, count=words)
    chunks = await chunk_document_counted("Title", body, max_tokens=60, count_tokens=count_tokens)
    assert chunks == expected
    assert len(chunks) > 5
    # one call for every block and heading, one to check the chunks: not one per block
    assert len(batches) == 2
    assert len(batches[0]) > 30
    assert all(len(set(batch)) == len(batch) for batch in batches), "no text counted twice"


async def test_batch_counter_rounds_for_oversized_blocks_stay_few() -> None:
    calls = 0

    async def count_tokens(texts: Sequence[str]) -> list[int]:
        nonlocal calls
        calls += 1
        return [words(t) for t in texts]

    body = " ".join(_words(f"w{j}x", 1) for j in range(2000))  # one 2000-token line
    chunks = await chunk_document_counted("T", body, max_tokens=100, count_tokens=count_tokens)
    assert all(words(c.text) <= 100 for c in chunks)
    assert " ".join(_body(c) for c in chunks).split() == body.split()
    assert calls <= 6
