"""Answer blocks: the parts of a chunk an extractive answer quotes whole.

In documentation the part that answers a question is rarely one sentence: it is an
example (the sentence that introduces a command and the command), a paragraph, a list,
a table row under its header. Quoting single sentences picked the sentence *before* the
one naming the function, or an error message instead of the option (issue #32). A block
is built from the chunk's quotable units (text.quotes), keeping their verbatim text:

- a paragraph's sentences, a list's items, a table's rows, a code block;
- a code block that a prose line introduces joins that prose ("The following command
  enables versioning::" and the command are one *example*); when the paragraph is long,
  only its last sentences that fit come along; a list joins the sentence ending in ":"
  that introduces it;
- a block longer than ``max_chars`` falls back to its parts: each sentence, each item,
  each row on its own (a long section is answered by its best sentences);
- a sentence that only points elsewhere ("See Git Authentication.") is left out, and a
  block of nothing else is no block.

A list item quoted without the rest of its list loses its number (a "3." out of its list
reads as the third step of something the reader does not see).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from groundwire_orchestrator.text.quotes import Unit, cite, cite_unit
from groundwire_orchestrator.text.sentences import content_words, split_sentences

BlockKind = Literal["prose", "list", "example", "code", "table"]

CITED_WORDS = 4
"""A sentence or row of a block is cited when it has this many content words: the
citation check finds a verbatim quote from four (a shorter one would be judged by
similarity alone and could be withheld from the middle of its block), and the gate
shows an uncited sentence that states this little."""

_NUMBERED = re.compile(r"^(\s*)\d{1,3}[.)](\s+)")


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    units: tuple[Unit, ...]
    """Verbatim units, in chunk order."""
    whole_list: bool = True
    """A list block holding its whole list (its numbers stay)."""

    @property
    def position(self) -> int:
        return self.units[0].position

    @property
    def heading(self) -> str:
        """The heading line above it inside the chunk ("" when none)."""
        return self.units[0].heading

    @property
    def lead(self) -> str:
        """What the block says it is about: its first sentence or item (an example's
        introduction), or a lone code block's introducing line."""
        first = self.units[0]
        return first.context if first.kind == "code" else first.text

    @property
    def chars(self) -> int:
        return sum(len(u.text) for u in self.units)

    @property
    def has_code(self) -> bool:
        return any(u.kind == "code" for u in self.units)


def _kind(unit: Unit) -> BlockKind:
    return {"sentence": "prose", "item": "list", "code": "code", "row": "table"}[unit.kind]  # type: ignore[return-value]


def blocks_of(
    units: Sequence[Unit],
    *,
    max_chars: int,
    keep: Callable[[Unit], bool] = lambda u: True,
) -> list[Block]:
    """The blocks of a chunk's ``units`` (see the module docstring), in order. ``keep``
    says which units may be quoted at all (a unit it refuses is left out of its block;
    a code block it refuses ends any example)."""
    groups: list[list[Unit]] = []
    for u in units:
        if groups and groups[-1][0].block == u.block:
            groups[-1].append(u)
        else:
            groups.append([u])
    blocks: list[Block] = []
    for group in groups:
        kept = [u for u in group if keep(u)]
        if not kept:
            continue
        kind = _kind(kept[0])
        previous = blocks[-1] if blocks else None
        if (
            kind == "code"
            and kept[0].context  # a prose line right before the fence introduces it
            and previous is not None
            and previous.kind in ("prose", "list")
            and previous.units[-1].block == group[0].block - 1
        ):
            intro = list(previous.units)
            # the introduction's last sentences that fit beside the code
            code_chars = len(kept[0].text)
            while len(intro) > 1 and sum(len(u.text) for u in intro) + code_chars > max_chars:
                intro.pop(0)
            blocks[-1] = Block("example", (*intro, kept[0]), previous.whole_list)
            continue
        if (
            kind == "list"
            and previous is not None
            and previous.kind == "prose"
            and previous.units[-1].block == group[0].block - 1
            and previous.units[-1].text.rstrip().endswith(":")
            and sum(len(u.text) for u in kept) + len(previous.units[-1].text) <= max_chars
        ):
            # a list keeps the sentence that introduces it ("Well-behaved clients should:")
            intro = list(previous.units)
            while len(intro) > 1 and sum(len(u.text) for u in (*intro, *kept)) > max_chars:
                intro.pop(0)
            blocks[-1] = Block("list", (*intro, *kept), len(kept) == len(group))
            continue
        if sum(len(u.text) for u in kept) > max_chars and len(kept) > 1:
            blocks.extend(Block(kind, (u,), whole_list=False) for u in kept)
        else:
            blocks.append(Block(kind, tuple(kept), whole_list=len(kept) == len(group)))
    return blocks


def _cited(text: str, number: int) -> str:
    """Each sentence of ``text`` cited when it says enough to be checked as a quote."""
    return " ".join(
        cite(s, number) if len(content_words(s)) >= CITED_WORDS else s
        for s in split_sentences(text)
    )


def render(block: Block, number: int) -> str:
    """The block as the answer quotes it, cited [number]: a paragraph's sentences on one
    line, a list's items one per line (numbers dropped when the list is not whole), a
    table's rows one per line, code followed by its marker line, each part cited."""
    parts: list[str] = []
    prose: list[str] = []
    for i, u in enumerate(block.units):
        last_item = i > 0 and block.units[i - 1].kind == "item"
        if u.kind == "sentence":
            prose.append(_cited(u.text, number))
            continue
        if prose:
            parts.append(" ".join(prose))
            prose = []
        if u.kind == "item":
            text = u.text if block.whole_list else _NUMBERED.sub(r"\1-\2", u.text, count=1)
            cited = _cited(text, number)
            if last_item:  # items of one list, one per line
                parts[-1] += "\n" + cited
            else:
                parts.append(cited)
        elif u.kind == "row":
            if not parts or not parts[-1].startswith("|"):  # the table's header first
                header = u.context.strip()
                cells = max(header.count("|") - 1, 1)
                marker = f" [{number}]" if len(content_words(header)) >= CITED_WORDS else ""
                parts.append(f"{header}{marker}\n|" + " --- |" * cells)
            row = u.text if len(content_words(u.text)) < CITED_WORDS else cite_unit(u, number)
            parts[-1] += "\n" + row
        else:
            parts.append(cite_unit(u, number))
    if prose:
        parts.append(" ".join(prose))
    return "\n\n".join(parts)
