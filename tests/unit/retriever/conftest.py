"""PDFs made here, with reportlab, rather than binary fixtures in the repository."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import pytest
from reportlab.pdfgen import canvas

PdfMaker = Callable[..., bytes]


def build_pdf(
    pages: Sequence[Sequence[str]], *, title: str | None = None, subject: str | None = None
) -> bytes:
    """A PDF with one page per entry, each line drawn as text (an empty line is a gap)."""
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
def make_pdf() -> PdfMaker:
    return build_pdf
