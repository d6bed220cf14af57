"""Progress bars for the CLI's long commands (tqdm, on stderr).

On a terminal a bar redraws in place ten times a second. When stderr is a file or a
pipe (CI, ``nohup``, ``2> log``) every redraw is kept: a 9-minute ``groundwire eval
retrieval`` on SciFact left 250 KB of them in its log. There a bar redraws every
``LOG_INTERVAL_S`` instead, so the log still says how far the work has got.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

LOG_INTERVAL_S = 30.0


def progress(iterable: Iterable[T] | None = None, **options: Any) -> tqdm[T]:
    """A tqdm bar on stderr (or ``file``), redrawn every ``LOG_INTERVAL_S`` when that
    is not a terminal; ``options`` are tqdm's and win over both defaults."""
    options.setdefault("file", sys.stderr)
    if not options["file"].isatty():
        options.setdefault("mininterval", LOG_INTERVAL_S)
    return tqdm(iterable, **options)


def advance(bar: tqdm[Any], done: int, total: int) -> None:
    """Moves ``bar`` to ``done`` of ``total``, for work that reports how far it has got
    (a job): a total of 0 is not known yet, a known one may grow."""
    if total and bar.total != total:
        bar.total = total
    bar.update(done - bar.n)
