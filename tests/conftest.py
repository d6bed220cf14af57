"""Fixtures shared by every test folder."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def minilm_build_log() -> list[str]:
    """What the session's MiniLM build printed."""
    return []


@pytest.fixture(scope="session")
def minilm_fp32(tmp_path_factory: pytest.TempPathFactory, minilm_build_log: list[str]):  # type: ignore[no-untyped-def]
    """The real all-MiniLM-L6-v2, exported to ONNX once per session (~10 s)."""
    from groundwire_embedder.export import build_profile

    out = tmp_path_factory.mktemp("models") / "minilm"
    return build_profile("minilm", out, log=minilm_build_log.append)


@pytest.fixture(scope="session")
def minilm_dir(minilm_fp32) -> Path:  # type: ignore[no-untyped-def]
    return Path(minilm_fp32.out_dir)


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a skipped test is a failure: install what it needs instead."""
    import os

    if os.environ.get("CI") and _skipped:
        print(f"\nCI forbids skipped tests; skipped: {_skipped}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def build_pdf(
    pages: Sequence[Sequence[str]], *, title: str | None = None, subject: str | None = None
) -> bytes:
    """A PDF with one page per entry, each line drawn as text (an empty line is a gap).

    PDFs are made here, with reportlab, rather than kept as binary fixtures.
    """
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, invariant=True)
    if title is not None:
        pdf.setTitle(title)
    if subject is not None:
        pdf.setSubject(subject)
    for lines in pages:
        y = 800
        for line in lines:
            if line:
                pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


@pytest.fixture
def make_pdf() -> Callable[..., bytes]:
    return build_pdf


# --- the system of record: the same tests on SQLite and on a real PostgreSQL ------------


@pytest.fixture(scope="session")
def postgres_server():  # type: ignore[no-untyped-def]
    """One real PostgreSQL server for the session (tests take a fresh database each)."""
    from tests.postgres_server import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty system of record: a SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    server = request.getfixturevalue("postgres_server")
    url: str = server.fresh_database()
    return url
