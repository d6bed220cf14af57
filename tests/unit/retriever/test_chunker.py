"""The section-aware chunker: heading paths, whole fences and tables, the token
budget, overlap, and the summary leading the first chunk."""

from __future__ import annotations

import pytest

from groundwire_retriever.ingest.chunker import TextChunk, approx_tokens, chunk_document

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
