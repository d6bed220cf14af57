"""The CLI's progress bars: live on a terminal, sparse in a log file."""

from __future__ import annotations

import io

from groundwire_cli.progress import LOG_INTERVAL_S, progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _redraws(text: str) -> int:
    return text.count("\r")


def test_a_log_file_gets_a_redraw_every_log_interval() -> None:
    log = io.StringIO()
    with progress(total=5_000, desc="ingest", file=log) as bar:
        assert bar.mininterval == LOG_INTERVAL_S
        for _ in range(5_000):
            bar.update(1)
    text = log.getvalue()
    assert _redraws(text) <= 3  # the start, the end, and nothing between in well under 30 s
    assert "ingest" in text and "5000/5000" in text


def test_a_terminal_keeps_tqdms_live_redraws() -> None:
    terminal = _Terminal()
    with progress(total=10, file=terminal) as bar:
        assert bar.mininterval < 1


def test_explicit_options_win() -> None:
    with progress(total=1, file=io.StringIO(), mininterval=0.5) as bar:
        assert bar.mininterval == 0.5


def test_iterating_yields_every_item() -> None:
    assert list(progress(range(4), file=io.StringIO())) == [0, 1, 2, 3]
