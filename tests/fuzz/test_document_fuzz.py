"""Fuzzing the Markdown/front-matter, HTML and PDF parsers and the chunker.

Inputs are built from runs of the characters the parsers' grammars care about
(``---``, newlines, spaces, ``#``, ``|``, tags, YAML anchors) so that long runs, the
shape that made a backtracking pattern take seconds to hours, come up often. Each
input must end as a result or an InvalidInput (never another exception) within a
time linear in its size: ``FLOOR_S`` plus ``PER_CHAR_S`` a character, far above
what a linear parser needs and far below what a quadratic one took on the same
sizes (the old front matter pattern: 2.3 s on 20,000 newlines).

Derandomized (the same inputs every run, no example database) and sized so the
whole file takes about a minute on a 2-core machine; the conftest prints the count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundwire_core.errors import InvalidInput
from groundwire_retriever.ingest.chunker import (
    approx_tokens,
    chunk_document,
    is_table_rule,
    parse_heading,
)
from groundwire_retriever.ingest.parsers import MAX_FRONT_MATTER_CHARS, parse
from tests.fuzz.conftest import FuzzTally

# generous: a 2-core machine running other suites beside this one took 2.4 s for inputs
# that take 0.1 s alone, and a wall-clock limit must not fail on load. The quadratic
# patterns this guards against grow past any such bound: 11 s at 40 KB, ~45 s at 80 KB.
FLOOR_S = 10.0
PER_CHAR_S = 1e-4


def _limit(size: int) -> float:
    return FLOOR_S + size * PER_CHAR_S


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,  # timed by FuzzTally instead: linear in the input's size
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.large_base_example,
        ],
    )


def runs(atoms: Sequence[str], max_run: int, max_parts: int = 10) -> st.SearchStrategy[str]:
    """Text made of runs of ``atoms`` (up to ``max_run`` repeats each) and bits of
    arbitrary text."""
    run = st.tuples(st.sampled_from(atoms), st.integers(1, max_run)).map(lambda p: p[0] * p[1])
    return st.lists(st.one_of(run, st.text(max_size=30)), max_size=max_parts).map("".join)


MD_ATOMS = [
    "\n",
    " ",
    "\t",
    "#",
    "# ",
    "###### ",
    "|",
    "| --- ",
    ":-:",
    "-",
    "---\n",
    "```",
    "~~~",
    "word ",
    "Word. ",
    "a!",
    "\r\n",
    "> ",
    "* ",
    "1. ",
    "<b>",
    "\u00a0",
    "\u2028",
    "\x0b",
]
YAML_ATOMS = [
    "key: ",
    "value",
    "\n",
    "  ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    ": ",
    "'",
    '"',
    "!!str ",
    "!!binary ",
    "? ",
    "|\n",
    ">\n",
    "#",
    "9",
    "0x",
    "1e",
    "<<: ",
    "---\n",
]
HTML_ATOMS = [
    "<b>",
    "</b>",
    "<div>",
    "</div>",
    "<p>",
    "<table><tr><td>",
    "</td></tr></table>",
    "<pre><code>",
    "</code></pre>",
    "```",
    "<h1>",
    "</h1>",
    "<h2>",
    "text ",
    "<!--",
    "-->",
    "<script>",
    "</script>",
    "&amp;",
    "&#",
    "<",
    ">",
    "\n",
    " ",
    "<ul><li>",
    "<a href='x'>",
    "<main>",
    "<article>",
    "<nav>",
    '<meta name="description" content="',
    "|",
]


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except InvalidInput as error:
        assert error.message  # every refusal says why
        return "refused"
    return "parsed"


def _parse_and_chunk(content: bytes, fmt: str) -> None:
    doc = parse(content, fmt, filename=f"doc.{fmt}")
    chunk_document(
        doc.title,
        doc.body,
        summary=doc.summary,
        markdown=doc.markdown,
        min_tokens=100,
        max_tokens=200,
        overlap_tokens=20,
    )


@fuzz_settings(examples=3500)
@given(text=runs(MD_ATOMS, 20_000))
def test_markdown(text: str, fuzz_tally: FuzzTally) -> None:
    content = text.encode("utf-8", "surrogatepass")
    with fuzz_tally.timed("markdown", _limit(len(content))):
        _outcome(lambda: _parse_and_chunk(content, "markdown"))


@fuzz_settings(examples=3500)
@given(front=runs(YAML_ATOMS, 5_000), body=runs(MD_ATOMS, 200, max_parts=4))
def test_front_matter(front: str, body: str, fuzz_tally: FuzzTally) -> None:
    content = f"---\n{front}\n---\n{body}".encode("utf-8", "surrogatepass")
    with fuzz_tally.timed("front matter", _limit(len(content))):
        result = _outcome(lambda: _parse_and_chunk(content, "markdown"))
    if result == "parsed" and len(front) < MAX_FRONT_MATTER_CHARS and "---" not in front:
        # nothing with an anchor or an alias is ever loaded (an alias bomb is one); a
        # "---" line inside would end the front matter early, hence the condition
        assert not any(
            isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None)
            for e in yaml.parse(front, Loader=yaml.SafeLoader)
        )


@fuzz_settings(examples=2500)
@given(text=runs(HTML_ATOMS, 3_000))
def test_html(text: str, fuzz_tally: FuzzTally) -> None:
    content = text.encode("utf-8", "surrogatepass")
    with fuzz_tally.timed("html", _limit(len(content))):
        _outcome(lambda: _parse_and_chunk(content, "html"))


_NUMBER = re.compile(rb"\d+")
_MUTATION = st.tuples(
    st.sampled_from(["flip", "insert", "delete", "number", "truncate", "repeat"]),
    st.floats(0, 1),
    st.binary(min_size=1, max_size=16),
    st.integers(0, 2**40),
)


def _mutate(pdf: bytes, mutations: Sequence[tuple[str, float, bytes, int]]) -> bytes:
    for kind, where, data, number in mutations:
        at = int(where * len(pdf))
        if kind == "flip" and pdf:
            at = min(at, len(pdf) - 1)
            pdf = pdf[:at] + bytes([pdf[at] ^ data[0]]) + pdf[at + 1 :]
        elif kind == "insert":
            pdf = pdf[:at] + data + pdf[at:]
        elif kind == "delete":
            pdf = pdf[:at] + pdf[at + len(data) :]
        elif kind == "truncate":
            pdf = pdf[:at]
        elif kind == "repeat":
            pdf = pdf[:at] + pdf[at : at + 64] * (number % 200) + pdf[at:]
        else:  # a number (object id, length, count, offset) replaced by another
            found = list(_NUMBER.finditer(pdf))
            if found:
                m = found[at % len(found)] if at else found[0]
                pdf = pdf[: m.start()] + str(number).encode() + pdf[m.end() :]
    return pdf


@fuzz_settings(examples=2500)
@given(mutations=st.lists(_MUTATION, min_size=1, max_size=6))
def test_pdf(
    mutations: list[tuple[str, float, bytes, int]],
    fuzz_tally: FuzzTally,
    make_pdf: Callable[..., bytes],
) -> None:
    base = make_pdf(
        [["Install the agent.", "", "Then restart it."], ["Second page text."]],
        title="Guide",
        subject="How to install",
    )
    content = _mutate(base, mutations)
    with fuzz_tally.timed("pdf", _limit(len(content)) + 1.0):
        _outcome(lambda: _parse_and_chunk(content, "pdf"))


@fuzz_settings(examples=3500)
@given(
    title=st.text(max_size=60),
    body=runs(MD_ATOMS, 3_000),
    summary=st.text(max_size=200),
    markdown=st.booleans(),
    limits=st.tuples(st.integers(0, 300), st.integers(32, 800), st.integers(0, 60)),
)
def test_chunker(
    title: str,
    body: str,
    summary: str,
    markdown: bool,
    limits: tuple[int, int, int],
    fuzz_tally: FuzzTally,
) -> None:
    min_tokens, max_tokens, overlap = limits
    chunks = fuzz_tally.run(
        "chunker",
        _limit(len(body) + len(title) + len(summary)),
        lambda: chunk_document(
            title,
            body,
            summary=summary,
            markdown=markdown,
            min_tokens=min_tokens,
            max_tokens=max_tokens,
            overlap_tokens=overlap,
        ),
    )
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.strip()
        if approx_tokens(" > ".join(chunk.heading_path)) < max_tokens // 2:
            assert approx_tokens(chunk.text) <= max_tokens, chunk


# The patterns these functions replaced: on short lines (where they are fast) the
# replacements must agree with them.
_OLD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_OLD_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_LINE_CHARS = st.sampled_from(["#", " ", "\t", "a", "|", "-", ":", "x y", "\u00a0", "\x0c"])


@fuzz_settings(examples=2500)
@given(line=st.lists(_LINE_CHARS, max_size=14).map("".join))
def test_heading_reading_matches_the_old_pattern(line: str, fuzz_tally: FuzzTally) -> None:
    old = _OLD_HEADING.match(line)
    expected = (len(old.group(1)), old.group(2)) if old else None
    assert fuzz_tally.run("heading/table line", FLOOR_S, lambda: parse_heading(line)) == expected


@fuzz_settings(examples=2500)
@given(line=st.lists(_LINE_CHARS, max_size=14).map("".join))
def test_table_rule_matches_the_old_pattern(line: str, fuzz_tally: FuzzTally) -> None:
    expected = bool(_OLD_TABLE_RULE.match(line))
    assert fuzz_tally.run("heading/table line", FLOOR_S, lambda: is_table_rule(line)) == expected
