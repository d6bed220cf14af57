"""The part of a long passage a bounded cross-encoder reads: its best window for the query.

A CPU deployment cuts every (query, passage) pair to the reranker's pair cap (its Info's
``max_tokens``: 128 by default, docs/sizing.md), and a cross-encoder that reads a
600-token chunk's first 128 tokens scores its introduction, not the paragraph that
answers. So the rerank stage sends each long candidate as its heading line plus the run
of whole sentences, within the cap, holding the most of the query's content words
(stemmed, stop words removed; distinct words first, then occurrences; the earliest run on
ties) — the window selection search engines use for result snippets.
"""

from __future__ import annotations

import functools

from groundwire_orchestrator.text.sentences import approx_tokens, content_words, sentence_spans

SPECIAL_TOKENS = 4
"""The model's own tokens around a pair (XLM-R: <s> q </s></s> p </s>)."""


def best_window(query: str, text: str, max_tokens: int) -> str:
    """``text`` when the pair fits ``max_tokens``; else its heading line and the best
    run of sentences for ``query`` that does (a word-cut prefix when no sentence does)."""
    budget = max_tokens - approx_tokens(query) - SPECIAL_TOKENS
    if max_tokens <= 0 or approx_tokens(text) <= budget:
        return text
    head, sep, body = text.partition("\n\n")
    if sep and "\n" not in head and approx_tokens(head) < budget // 4:
        budget -= approx_tokens(head) + 1
        prefix = head + "\n\n"
    else:
        prefix, body = "", text
    wanted = set(content_words(query))
    spans, words, sizes = _sentences(body)
    if not spans or not wanted:
        return prefix + _cut(body, budget)
    best: tuple[int, int, int, int] | None = None  # (distinct, hits, -start, end)
    end = 0
    used = 0
    for start in range(len(spans)):
        if end < start:
            end, used = start, 0
        while end < len(spans) and used + sizes[end] <= budget:
            used += sizes[end]
            end += 1
        if end > start:
            found = [w for ws in words[start:end] for w in ws if w in wanted]
            score = (len(set(found)), len(found), -start, end)
            if best is None or score > best:
                best = score
            used -= sizes[start]
    if best is None:  # every sentence alone is longer than the budget
        return prefix + _cut(body, budget)
    first, last = -best[2], best[3]
    return prefix + body[spans[first][0] : spans[last - 1][1]]


@functools.lru_cache(maxsize=4096)
def _sentences(
    body: str,
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[str, ...], ...], tuple[int, ...]]:
    """A passage's sentence spans, their content words and sizes. Cached: the same chunks
    come back search after search, and stemming every sentence of 50 candidates was 37 %
    of the orchestrator's CPU per search (py-spy, benchmarks/plumbing_bench.py)."""
    spans = tuple(sentence_spans(body))
    words = tuple(tuple(content_words(body[a:b])) for a, b in spans)
    sizes = tuple(approx_tokens(body[a:b]) + 1 for a, b in spans)
    return spans, words, sizes


def _cut(text: str, tokens: int) -> str:
    cut = text[: max(tokens, 0) * 4]
    space = cut.rfind(" ")
    return cut[:space] if space > len(cut) // 2 else cut
