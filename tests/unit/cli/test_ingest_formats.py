"""`groundwire ingest` with nothing it can read: it says which files it found and
which formats it reads, and sends nothing (a request would create the collection)."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundwire_cli.__main__ import main
from groundwire_cli.cluster import free_port
from groundwire_cli.ingest import SUFFIXES


def test_a_folder_of_unread_formats_names_them_and_the_supported_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("index.odt", "usage.odt", "api.odt", "blob.bin"):
        (tmp_path / name).write_text("Title\n=====\n\nText.\n")
    with pytest.raises(SystemExit) as exited:
        main(["ingest", str(tmp_path), "--retriever", f"127.0.0.1:{free_port()}"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "no documents found" in err
    assert "4 files (3 .odt, 1 .bin)" in err
    assert f"supported formats: {', '.join(SUFFIXES)}" in err


def test_a_lone_unsupported_file_is_skipped_without_a_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lone = tmp_path / "notes.odt"
    lone.write_text("Notes\n=====\n")
    port = free_port()
    with pytest.raises(SystemExit) as exited:
        main(["ingest", str(lone), "--collection", "new", "--retriever", f"127.0.0.1:{port}"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert f"no documents found in {lone}: 1 file (1 .odt), none in a supported format" in err
    # no request was made: with one, the closed port would have been the error
    assert "unavailable" not in err and str(port) not in err


def test_files_the_ingest_does_not_read_are_counted_not_hidden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "guide.md").write_text("# Guide\n\nText.\n")
    for name in ("news.rst.gz", "conf.py.gz", "logo.png"):
        (tmp_path / name).write_bytes(b"\x00")
    with pytest.raises(SystemExit):  # nothing listens on the port: the ingest itself fails
        main(["ingest", str(tmp_path), "--retriever", f"127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert "left out 3 files in formats the ingest does not read (2 .gz, 1 .png)" in err
