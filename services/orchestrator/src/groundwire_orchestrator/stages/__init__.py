"""One small component per stage of the chain, each of one shape: plain config in the
constructor, ``async run(input) -> (output, StageReport)`` with a typed input, and its
fallback reported, not raised. The streaming answer stage is the one exception (see
stages.answer). Helpers that are not stages live in ``text/`` and ``llm/``."""
