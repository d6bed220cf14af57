"""How an answer's citations are numbered and kept pointing at sources: the
append-only source ledger of one response, and the streaming filter that drops [n]
markers pointing at no source."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from groundwire_orchestrator.domain import Candidate, NumberedSource
from groundwire_orchestrator.text.sentences import MARKER


class SourceLedger:
    """Numbers sources for one response, append-only: a chunk keeps the number it got
    first, new chunks get the next numbers, and a number never changes meaning."""

    def __init__(self) -> None:
        self._by_number: dict[int, NumberedSource] = {}
        self._by_chunk: dict[str, int] = {}

    def add(self, candidates: Iterable[Candidate]) -> list[NumberedSource]:
        """Numbers the chunks not seen before; returns only those (the new sources)."""
        added = []
        for cand in candidates:
            if cand.chunk_id in self._by_chunk:
                continue
            number = len(self._by_number) + 1
            src = NumberedSource(number, cand)
            self._by_number[number] = src
            self._by_chunk[cand.chunk_id] = number
            added.append(src)
        return added

    def get(self, number: int) -> NumberedSource | None:
        return self._by_number.get(number)

    def number_of(self, chunk_id: str) -> int | None:
        return self._by_chunk.get(chunk_id)

    def __contains__(self, number: object) -> bool:
        return number in self._by_number

    def __len__(self) -> int:
        return len(self._by_number)

    @property
    def sources(self) -> list[NumberedSource]:
        return [self._by_number[n] for n in sorted(self._by_number)]


# ------------------------------------------------------------- stream filter

_HELD = re.compile(r"(?:\s*\[[\d,\s]{0,40})$|\s+$")
_SPACED_MARKER = re.compile(r"(\s*)" + MARKER.pattern)


class CitationFilter:
    """Rewrites citation markers as text streams: numbers with no source are removed
    ("[2, 7]" -> "[2]"; "[7]" and the space before it disappear), so no reader ever
    sees a citation that points nowhere. Holds back only a possible marker in progress
    or trailing whitespace until the next delta shows what it is."""

    def __init__(self, valid: Callable[[int], bool]) -> None:
        self._valid = valid
        self._pending = ""
        self.dropped: list[int] = []

    def _rewrite(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            numbers = [int(n) for n in match.group(2).split(",")]
            good = [n for n in numbers if self._valid(n)]
            self.dropped.extend(n for n in numbers if not self._valid(n))
            if not good:
                return ""
            if len(good) == len(numbers):
                return match.group(0)
            return match.group(1) + "[" + ", ".join(str(n) for n in good) + "]"

        return _SPACED_MARKER.sub(one, text)

    def feed(self, delta: str) -> str:
        """The text that can be shown now."""
        text = self._pending + delta
        held = _HELD.search(text)
        cut = held.start() if held else len(text)
        self._pending = text[cut:]
        return self._rewrite(text[:cut])

    def flush(self) -> str:
        """Whatever was held back, rewritten (call once the stream ends)."""
        text, self._pending = self._pending, ""
        return self._rewrite(text)


def clean_markers(text: str, valid: Callable[[int], bool]) -> tuple[str, list[int]]:
    """``text`` with markers pointing nowhere removed, and the numbers dropped."""
    flt = CitationFilter(valid)
    out = flt.feed(text) + flt.flush()
    return out, flt.dropped

