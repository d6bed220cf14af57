"""`groundwire ingest` when no retriever answers: one line saying where it looked and
what to do, exit status 1, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire_cli.__main__ import main
from groundwire_cli.cluster import free_port


def test_no_retriever_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "note.md"
    doc.write_text("# Note\n\nSomething worth finding.\n")
    port = free_port()
    with pytest.raises(SystemExit) as exited:
        main(["ingest", str(doc), "--retriever", f"127.0.0.1:{port}"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("error")]
    assert line.startswith("error (retriever): retriever is unavailable")
    assert f"127.0.0.1:{port}" in line and "groundwire up" in line
    assert "Traceback" not in err


def test_nothing_to_ingest_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ingest", str(tmp_path)])
    assert exited.value.code == 1
    assert "no documents found" in capsys.readouterr().err
