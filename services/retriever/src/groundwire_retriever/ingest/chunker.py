"""Section-aware chunking of Markdown-like text. One idea at ~730 lines: the block
reader, the section planner and the packer share one token budget and one notion of
a block, and every rule (fences, tables, overlap) touches all three.

Splits at headings, keeps a fenced code block or a table whole (a block is only cut
when it alone exceeds the budget, and then each piece is re-fenced, or keeps the
table's header rows), packs paragraphs into chunks of at most ``max_tokens`` with
``overlap_tokens`` carried into the next chunk of the same section, and prefixes
every chunk with its heading path ("Title > Section > Sub"). The document's summary
leads its first chunk. ``max_tokens`` bounds the whole chunk text as embedded:
heading path line included.

With ``min_tokens`` above zero, small pieces are combined. Sections that each fit
in one chunk are merged in document order: a group takes in the next section only
while the group is still below ``min_tokens`` and the result stays within
``max_tokens``; a group left below ``min_tokens`` joins the group before it when
that fits. A section that needs several chunks is never merged. The merged chunk's
heading path is the members' common parent (the deepest heading they all sit
under), and the headings below it stay in the body as Markdown heading lines, so
the chunk reads like the document did. A section packed into several chunks is
rebalanced when its last chunk would fall below ``min_tokens``: the smallest budget
that gives the same number of chunks is used, so the chunks come out even instead
of full ones and a stub.

Tokens are counted in batches: the planning below is a generator that yields the
texts it needs counted and receives their counts, so the same code runs with a
local estimate (``chunk_document``) or the embedder's tokenizer over the network
(``chunk_document_counted``: a few RPCs per document, not one per paragraph). A
chunk's size is estimated as the sum of its parts, then every chunk text is counted
once more and a section whose chunk came out over ``max_tokens`` is planned again
with a smaller budget.

Hand-written rather than a Markdown library's splitter because the rules above
(fence/table integrity, heading paths, token packing with overlap) are exactly what
we need and no kept library does all of them.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace

# Every pattern here runs on untrusted text, so each is linear in its input: no
# quantified group whose matches can overlap a neighbour's (the heading and table
# rule patterns that were here took minutes on one line led by many spaces; their
# grammar is now read with string methods below).
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_RULE_CELL = re.compile(r":?-+:?")
_PADDING = re.compile(r" {2,}")
_LONG_RULE = re.compile(r"-{4,}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BLANK_LINES = re.compile(r"\n\s*\n")
_MAX_HEADING_CHARS = 200
# The heading path line leads every chunk: were it near the token budget, each chunk
# would hold one word after it (a long-titled 5 KB page took 87 s and GBs). Middle
# headings are dropped until the line fits.
_MAX_PATH_CHARS = 420
# The same for the fence lines or table header an oversized block's pieces repeat: a
# 32,000-backtick fence (too long to count) made every word a chunk of 64 KB.
_MAX_WRAPPER_CHARS = 1_000
_MAX_ATTEMPTS = 5
# Longer texts are cut before they are counted: tokenizing one huge string is slow
# (a minute for 20 MB with a fast tokenizer) and no chunk can hold it anyway.
_MAX_COUNTED_CHARS = 32_000

TokenCounter = Callable[[str], int]
"""Tokens in one text, computed locally."""
BatchTokenCounter = Callable[[Sequence[str]], Awaitable[list[int]]]
"""Tokens per text for a batch of texts, e.g. the embedder's Tokenize RPC."""

# The planning generator yields texts to count and is sent their counts.
_Counting = Generator[list[str], list[int], None]


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate: about 4/3 tokens per whitespace-separated word."""
    return (len(text.split()) * 4 + 2) // 3


@dataclass(frozen=True)
class TextChunk:
    index: int
    heading_path: tuple[str, ...]
    text: str
    """The chunk as embedded and shown: heading path line, blank line, body."""


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]
    levels: tuple[int, ...]
    """The heading level of each ``path`` entry (0 for the document title)."""
    blocks: tuple[str, ...]


def parse_heading(line: str) -> tuple[int, str] | None:
    """An ATX heading line's level and text (``## Setup ##`` -> ``(2, "Setup")``), or None.

    What ``^(#{1,6})\\s+(.*?)\\s*#*\\s*$`` matched, read in linear time.
    """
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or len(line) == level or not line[level].isspace():
        return None
    return level, line[level:].strip().rstrip("#").rstrip()


def is_table_rule(line: str) -> bool:
    """Whether ``line`` is a pipe table's delimiter row (``| --- | :-: |``)."""
    cells = line.strip()
    cells = cells[1:] if cells.startswith("|") else cells
    cells = cells[:-1] if cells.endswith("|") else cells
    return all(_RULE_CELL.fullmatch(cell.strip()) for cell in cells.split("|"))


def _heading_name(text: str) -> str:
    if len(text) <= _MAX_HEADING_CHARS:
        return text
    return text[: _MAX_HEADING_CHARS - 1].rstrip() + "…"


def _sections(title: str, body: str, *, markdown: bool = True) -> Iterator[_Section]:
    title = _heading_name(title)
    if not markdown:
        blocks = tuple(b.strip("\n") for b in _BLANK_LINES.split(body) if b.strip())
        if blocks:
            yield _Section((title,), (0,), blocks) if title else _Section((), (), blocks)
        return

    stack: list[tuple[int, str]] = []
    blocks_: list[str] = []
    current: list[str] = []
    fence: str | None = None
    in_table = False
    headings_seen = 0
    leading_h1 = False  # a document's first heading, when level 1, is its title

    def section(blocks: list[str]) -> _Section:
        entries = list(stack)
        if entries and ((leading_h1 and entries[0][0] == 1) or entries[0][1] == title):
            entries = entries[1:]
        if title:
            entries.insert(0, (0, title))
        while len(entries) > 2 and sum(len(name) + 3 for _, name in entries) > _MAX_PATH_CHARS:
            del entries[1]
        return _Section(
            tuple(name for _, name in entries), tuple(lv for lv, _ in entries), tuple(blocks)
        )

    def close_block() -> None:
        nonlocal current, in_table
        text = "\n".join(current).strip("\n")
        if text.strip():
            blocks_.append(text)
        current = []
        in_table = False

    for line in body.split("\n"):
        if fence is not None:
            current.append(line)
            closing = line.strip()
            # CommonMark: only a run of the same character, at least as long, closes it
            if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
                fence = None
                close_block()
            continue
        fence_match = _FENCE.match(line)
        if fence_match:
            close_block()
            fence = fence_match.group(1)
            current.append(line)
            continue
        heading = parse_heading(line)
        if heading:
            close_block()
            if blocks_:
                yield section(blocks_)
            blocks_ = []
            level, name = heading
            headings_seen += 1
            if headings_seen == 1 and level == 1:
                leading_h1 = True
            elif level == 1:
                leading_h1 = False
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _heading_name(name)))
            continue
        is_table_row = line.lstrip().startswith("|")
        if not line.strip():
            if not in_table:
                close_block()
            continue
        if in_table and not is_table_row:
            close_block()
        if is_table_row and not in_table:
            close_block()
            in_table = True
        current.append(line)
    close_block()  # an unclosed fence ends with the document
    if blocks_:
        yield section(blocks_)


def _header(path: Sequence[str]) -> str:
    return " > ".join(path)


def _heading_line(section: _Section, depth: int) -> str:
    """How the heading at ``path[depth]`` appears inside a merged chunk."""
    return f"{'#' * max(section.levels[depth], 1)} {section.path[depth]}"


def _render(path: Sequence[str], blocks: Sequence[str]) -> str:
    body = "\n\n".join(blocks)
    header = _header(path)
    return f"{header}\n\n{body}" if header else body


@dataclass
class _Tally:
    """Token counts known so far; unknown texts are asked for in one batch."""

    counts: dict[str, int] = field(default_factory=dict)

    def ask(self, texts: Sequence[str], *, any_length: bool = False) -> _Counting:
        missing = [
            t
            for t in dict.fromkeys(texts)
            if t not in self.counts and (any_length or len(t) <= _MAX_COUNTED_CHARS)
        ]
        if missing:
            counts = yield missing
            if len(counts) != len(missing):
                raise ValueError(f"asked for {len(missing)} token counts, got {len(counts)}")
            self.counts.update(zip(missing, counts, strict=True))

    def total(self, text: str) -> int:
        """Tokens of ``text`` as a text of its own, special tokens included."""
        return self.counts[text]

    def cost(self, text: str) -> int:
        """Tokens ``text`` adds to a chunk: its count less the model's special tokens
        (for a text too long to count, a guess of 4 characters a token)."""
        if text not in self.counts:
            return len(text) // 4 + 1
        return max(self.counts[text] - self.counts.get("", 0), 0)

    def fits(self, text: str, budget: int) -> bool:
        """Whether ``text`` fits ``budget``; a text too long to count never does."""
        return text in self.counts and self.cost(text) <= budget


# -- cutting blocks larger than the budget ---------------------------------------


@dataclass
class _Cut:
    """One oversized block being cut: parts (separator before, text) and wrappers."""

    section: int
    prefix: str
    suffix: str
    parts: list[tuple[str, str]]
    budget: int = 0


def _start_cut(section: int, block: str, cost: int, budget: int) -> _Cut:
    lines = block.split("\n")
    fence = _FENCE.match(lines[0])
    if fence and len(lines) > 1:
        marker = fence.group(1)
        last = lines[-1].strip()
        closed = len(lines) > 1 and set(last) == {marker[0]} and len(last) >= len(marker)
        inner = lines[1:-1] if closed else lines[1:]
        # Each piece is fenced again, so every chunk holds well-formed code blocks.
        opening, closing = lines[0], (lines[-1] if closed else marker)
        if len(opening) + len(closing) > _MAX_WRAPPER_CHARS:
            opening, closing = _short_fence(lines[0], marker, inner)
        if len(opening) + len(closing) <= _MAX_WRAPPER_CHARS:
            return _Cut(section, opening, closing, _joined(inner, "\n"))
    elif len(lines) > 2 and all(ln.lstrip().startswith("|") for ln in lines):
        # Padding and long rules cost tokens in every piece but render the same: a
        # rule of 230 dashes (Node.js's encodings table) is ~250 WordPiece tokens, more
        # than a chunk, and left each piece one character of a row.
        header = "\n".join([_PADDING.sub(" ", lines[0]), _LONG_RULE.sub("---", lines[1])])
        if len(header) <= _MAX_WRAPPER_CHARS and is_table_rule(lines[1]):
            # Each piece repeats the header row and rule, so it is still a table.
            return _Cut(section, header, "", _joined(lines[2:], "\n"))
    return _Cut(section, "", "", _finer(block, cost, budget) or [("", block)])


def _short_fence(opening: str, marker: str, inner: Sequence[str]) -> tuple[str, str]:
    """The shortest fence that still encloses ``inner`` (CommonMark: longer than any
    run of its character inside), keeping the info string's first 100 characters."""
    char = marker[0]
    longest = 0
    for line in inner:
        stripped = line.strip()
        if stripped and set(stripped) == {char}:
            longest = max(longest, len(stripped))
    fence = char * max(3, longest + 1)
    info = opening.strip()[len(marker) :].strip()[:100]
    return fence + info, fence


def _joined(units: Sequence[str], sep: str) -> list[tuple[str, str]]:
    return [("" if i == 0 else sep, unit) for i, unit in enumerate(units)]


def _finer(text: str, cost: int, budget: int) -> list[tuple[str, str]]:
    """``text`` in smaller parts: lines, sentences, word windows, then characters."""
    if "\n" in text:
        return _joined(text.split("\n"), "\n")
    sentences = _SENTENCE_END.split(text)
    if len(sentences) > 1:
        return _joined(sentences, " ")
    pieces = math.ceil(cost / max(budget, 1)) + 1
    words = text.split(" ")
    if len(words) > 1:
        size = math.ceil(len(words) / min(len(words), pieces))
        return _joined([" ".join(words[i : i + size]) for i in range(0, len(words), size)], " ")
    if len(text) > 1:
        size = math.ceil(len(text) / min(len(text), pieces))
        return _joined([text[i : i + size] for i in range(0, len(text), size)], "")
    return []


def _cut_all(cuts: list[_Cut], budgets: Sequence[int], tally: _Tally) -> _Counting:
    """Refines every cut's parts until each fits its budget; one count batch per round."""
    yield from tally.ask([t for c in cuts for t in (c.prefix, c.suffix, *(p for _, p in c.parts))])
    for cut in cuts:
        if (cut.prefix or cut.suffix) and 2 * (
            tally.cost(cut.prefix) + tally.cost(cut.suffix)
        ) > budgets[cut.section]:
            # wrappers this big would leave each piece a few characters: the block is
            # cut as it stands, its header or fence lines once, in the first piece
            head = [("", cut.prefix)] if cut.prefix else []
            body = [("\n" if head and i == 0 else sep, t) for i, (sep, t) in enumerate(cut.parts)]
            cut.parts = head + body + ([("\n", cut.suffix)] if cut.suffix else [])
            cut.prefix = cut.suffix = ""
        cut.budget = max(budgets[cut.section] - tally.cost(cut.prefix) - tally.cost(cut.suffix), 1)
    while True:
        refined = False
        for cut in cuts:
            parts: list[tuple[str, str]] = []
            for sep, text in cut.parts:
                fits = tally.fits(text, cut.budget)
                finer = [] if fits else _finer(text, tally.cost(text), cut.budget)
                if finer:
                    refined = True
                    parts.append((sep, finer[0][1]))
                    parts.extend(finer[1:])
                else:
                    parts.append((sep, text))
            cut.parts = parts
        if not refined:
            return
        yield from tally.ask([t for c in cuts for _, t in c.parts])


def _pieces_of(cut: _Cut, tally: _Tally) -> list[str]:
    """The cut's parts packed back together, each piece within the budget."""
    pieces: list[str] = []
    current: str | None = None
    size = 0
    for sep, text in cut.parts:
        n = tally.cost(text)
        if current is not None and size + n > cut.budget:
            pieces.append(current)
            current, size = None, 0
        current = text if current is None else current + sep + text
        size += n
    if current is not None:
        pieces.append(current)
    wrap = [p for p in (cut.prefix, cut.suffix) if p]
    if not wrap:
        return [p for p in pieces if p.strip()]
    return ["\n".join(x for x in (cut.prefix, p, cut.suffix) if x) for p in pieces if p.strip()]


def _fit_blocks(
    sections: Sequence[_Section], budgets: Sequence[int], tally: _Tally
) -> Generator[list[str], list[int], tuple[list[list[str]], int]]:
    """Each section's blocks, with any block over its section's budget cut into pieces;
    and how many pieces the document's first block became."""
    cuts: dict[tuple[int, int], _Cut] = {}
    for i, section in enumerate(sections):
        for j, block in enumerate(section.blocks):
            if not tally.fits(block, budgets[i]):
                cuts[i, j] = _start_cut(i, block, tally.cost(block), budgets[i])
    if cuts:
        yield from _cut_all(list(cuts.values()), budgets, tally)
    fitted: list[list[str]] = []
    first_pieces = 0
    for i, section in enumerate(sections):
        blocks: list[str] = []
        for j, block in enumerate(section.blocks):
            cut = cuts.get((i, j))
            blocks.extend(_pieces_of(cut, tally) if cut else [block])
            if (i, j) == (0, 0):
                first_pieces = len(blocks)
        fitted.append(blocks)
    yield from tally.ask([b for blocks in fitted for b in blocks])  # the new pieces
    return fitted, first_pieces


# -- packing blocks into chunks ---------------------------------------------------


def _greedy(
    blocks: Sequence[str], budget: int, overlap_tokens: int, cost: TokenCounter
) -> list[list[str]]:
    chunks: list[list[str]] = []
    packed: list[str] = []
    size = 0
    for block in blocks:
        n = cost(block)
        if packed and size + n > budget:
            chunks.append(packed)
            last = packed[-1]
            # the previous block is carried over only when it is small enough
            if overlap_tokens > 0 and cost(last) <= overlap_tokens:
                packed, size = [last], cost(last)
            else:
                packed, size = [], 0
            if size + n > budget:
                packed, size = [], 0
        packed.append(block)
        size += n
    if packed:
        chunks.append(packed)
    return chunks


def _pack(
    blocks: Sequence[str], budget: int, overlap_tokens: int, min_tokens: int, cost: TokenCounter
) -> list[list[str]]:
    """Greedy packing; rebalanced when the last chunk would fall below ``min_tokens``."""
    chunks = _greedy(blocks, budget, overlap_tokens, cost)
    if len(chunks) < 2 or sum(cost(b) for b in chunks[-1]) >= min_tokens:
        return chunks
    low, high = 1, budget
    while low < high:  # the smallest budget that still needs no more chunks
        middle = (low + high) // 2
        if len(_greedy(blocks, middle, overlap_tokens, cost)) <= len(chunks):
            high = middle
        else:
            low = middle + 1
    balanced = _greedy(blocks, low, overlap_tokens, cost)
    return balanced if len(balanced) <= len(chunks) else chunks


@dataclass
class _Group:
    members: list[int]
    path: tuple[str, ...]


def _common_path(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    common: list[str] = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common.append(x)
    return tuple(common)


@dataclass
class _Planner:
    sections: list[_Section]
    min_tokens: int
    max_tokens: int
    overlap_tokens: int
    has_lead: bool = False
    """Whether the first block of the first section is the document's summary."""
    tally: _Tally = field(default_factory=_Tally)
    reductions: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    unmergeable: set[int] = field(default_factory=set)
    lead_pieces: int = 0
    """How many of the first section's fitted blocks the summary became."""

    def plan(self) -> Generator[list[str], list[int], list[TextChunk]]:
        wanted = [""]  # the model's special tokens: what an empty text costs
        for section in self.sections:
            depths = range(len(section.path) + 1)
            wanted += [_header(section.path[:d]) for d in depths]
            wanted += [_heading_line(section, d) for d in depths[:-1]]
            wanted += section.blocks
        yield from self.tally.ask(wanted)
        drafts: list[tuple[tuple[str, ...], list[str], list[int]]] = []
        for _ in range(_MAX_ATTEMPTS):
            budgets = [self._budget(i) for i in range(len(self.sections))]
            fitted, first_pieces = yield from _fit_blocks(self.sections, budgets, self.tally)
            self.lead_pieces = first_pieces if self.has_lead else 0
            drafts = self._drafts(fitted, budgets)
            texts = [_render(path, blocks) for path, blocks, _ in drafts]
            yield from self.tally.ask(texts, any_length=True)
            over = False
            for text, (_, _, members) in zip(texts, drafts, strict=True):
                excess = self.tally.total(text) - self.max_tokens
                if excess > 0:
                    over = True
                    if len(members) > 1:
                        self.unmergeable.update(members)
                    else:
                        self.reductions[members[0]] += excess
            if not over:
                break
        return [
            TextChunk(index, path, _render(path, blocks))
            for index, (path, blocks, _) in enumerate(drafts)
        ]

    def _budget(self, i: int) -> int:
        path_cost = self.tally.cost(_header(self.sections[i].path))
        room = self.max_tokens - self.tally.total("") - path_cost - self.reductions[i]
        return max(room, 1)

    def _drafts(
        self, fitted: list[list[str]], budgets: list[int]
    ) -> list[tuple[tuple[str, ...], list[str], list[int]]]:
        drafts: list[tuple[tuple[str, ...], list[str], list[int]]] = []
        for group in self._groups(fitted, budgets):
            if len(group.members) > 1:
                drafts.append((group.path, self._merged_blocks(group, fitted), group.members))
                continue
            i = group.members[0]
            chunks = _pack(
                fitted[i], budgets[i], self.overlap_tokens, self.min_tokens, self.tally.cost
            )
            drafts.extend((self.sections[i].path, blocks, [i]) for blocks in chunks)
        return drafts

    def _merged_blocks(self, group: _Group, fitted: list[list[str]]) -> list[str]:
        blocks: list[str] = []
        shown = group.path
        for i in group.members:
            section = self.sections[i]
            lead = self.lead_pieces if i == 0 else 0  # the summary comes before any heading
            blocks.extend(fitted[i][:lead])
            # the headings this member does not share with the one before it
            for depth in range(len(_common_path(section.path, shown)), len(section.path)):
                blocks.append(_heading_line(section, depth))
            shown = section.path
            blocks.extend(fitted[i][lead:])
        return blocks

    def _size(self, group: _Group, fitted: list[list[str]]) -> int:
        """Estimated tokens of the group as one chunk, special tokens included."""
        cost = self.tally.cost
        return (
            self.tally.total("")
            + cost(_header(group.path))
            + sum(cost(b) for b in self._merged_blocks(group, fitted))
        )

    def _joined(
        self, a: _Group, b: _Group, fitted: list[list[str]], *, family_only: bool
    ) -> _Group | None:
        """``a`` and ``b`` as one group, when it fits in one chunk (and, with
        ``family_only``, every member is the group's own section or a direct child)."""
        group = _Group([*a.members, *b.members], _common_path(a.path, b.path))
        if family_only and any(
            self.sections[i].path not in (group.path, group.path + self.sections[i].path[-1:])
            for i in group.members
        ):
            return None
        return group if self._size(group, fitted) <= self.max_tokens else None

    def _groups(self, fitted: list[list[str]], budgets: list[int]) -> list[_Group]:
        singles = [_Group([i], s.path) for i, s in enumerate(self.sections)]
        if self.min_tokens <= 0:
            return singles
        # First within one family (siblings, a parent and its children), then across.
        families = self._merge_runs(singles, fitted, budgets, family_only=True)
        return self._merge_runs(families, fitted, budgets, family_only=False)

    def _merge_runs(
        self,
        groups: list[_Group],
        fitted: list[list[str]],
        budgets: list[int],
        *,
        family_only: bool,
    ) -> list[_Group]:
        def mergeable(g: _Group) -> bool:
            return all(
                i not in self.unmergeable and sum(map(self.tally.cost, fitted[i])) <= budgets[i]
                for i in g.members
            )

        def small(g: _Group) -> bool:
            return self._size(g, fitted) < self.min_tokens

        forward: list[_Group] = []
        for group in groups:  # a small group takes in what follows
            last = forward[-1] if forward else None
            if last and small(last) and mergeable(last) and mergeable(group):
                joined = self._joined(last, group, fitted, family_only=family_only)
                if joined:
                    forward[-1] = joined
                    continue
            forward.append(group)
        merged: list[_Group] = []
        for group in forward:  # a small group left over joins the one before it
            last = merged[-1] if merged else None
            if last and small(group) and mergeable(last) and mergeable(group):
                joined = self._joined(last, group, fitted, family_only=family_only)
                if joined:
                    merged[-1] = joined
                    continue
            merged.append(group)
        return merged


def _planner(
    title: str,
    body: str,
    *,
    summary: str,
    markdown: bool,
    min_tokens: int,
    max_tokens: int,
    overlap_tokens: int,
) -> _Planner:
    sections = list(_sections(title, body, markdown=markdown))
    lead = summary.strip()
    if lead and sections:
        sections[0] = replace(sections[0], blocks=(lead, *sections[0].blocks))
    return _Planner(sections, min_tokens, max_tokens, overlap_tokens, has_lead=bool(lead))


ChunkPlan = Generator[list[str], list[int], list[TextChunk]]
"""A chunking plan in progress: yields texts to count, is sent their counts, and
returns the chunks (``StopIteration.value``)."""


def plan_chunks(
    title: str,
    body: str,
    *,
    summary: str = "",
    markdown: bool = True,
    min_tokens: int = 0,
    max_tokens: int = 800,
    overlap_tokens: int = 50,
) -> ChunkPlan:
    """The planning generator behind ``chunk_document``, for a caller that counts
    tokens elsewhere (the parse sandbox's worker asks its parent)."""
    return _planner(
        title,
        body,
        summary=summary,
        markdown=markdown,
        min_tokens=min_tokens,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
    ).plan()


def chunk_document(
    title: str,
    body: str,
    *,
    summary: str = "",
    markdown: bool = True,
    min_tokens: int = 0,
    max_tokens: int = 800,
    overlap_tokens: int = 50,
    count: TokenCounter = approx_tokens,
) -> list[TextChunk]:
    """Chunks one document, counting tokens with a local ``count``.

    Chunk texts, heading path line included, never exceed ``max_tokens`` by
    ``count``. ``markdown=False`` treats the body as plain paragraphs (no headings,
    fences or tables). ``min_tokens=0`` keeps every section apart.
    """
    plan = _planner(
        title,
        body,
        summary=summary,
        markdown=markdown,
        min_tokens=min_tokens,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
    ).plan()
    try:
        request = next(plan)
        while True:
            request = plan.send([count(t) for t in request])
    except StopIteration as done:
        chunks: list[TextChunk] = done.value
        return chunks


async def chunk_document_counted(
    title: str,
    body: str,
    *,
    count_tokens: BatchTokenCounter,
    summary: str = "",
    markdown: bool = True,
    min_tokens: int = 0,
    max_tokens: int = 800,
    overlap_tokens: int = 50,
) -> list[TextChunk]:
    """``chunk_document`` with a batch counter (e.g. the embedder's tokenizer).

    Calls ``count_tokens`` a few times per document: the blocks and headings at
    once, the pieces of any oversized block per refinement round, and the final
    chunk texts. Its errors propagate.
    """
    plan = _planner(
        title,
        body,
        summary=summary,
        markdown=markdown,
        min_tokens=min_tokens,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
    ).plan()
    # Planning a large document is CPU work: each step runs in a worker thread.
    step = await asyncio.to_thread(_step, plan, None)
    while not isinstance(step, _Done):
        counts = await count_tokens(step)
        step = await asyncio.to_thread(_step, plan, list(counts))
    return step.chunks


@dataclass(frozen=True)
class _Done:
    chunks: list[TextChunk]


def _step(
    plan: Generator[list[str], list[int], list[TextChunk]], counts: list[int] | None
) -> list[str] | _Done:
    """Advances the plan: the next texts to count, or the result. (A StopIteration
    cannot cross asyncio.to_thread, so it is turned into a value here.)"""
    try:
        return next(plan) if counts is None else plan.send(counts)
    except StopIteration as done:
        return _Done(done.value)
