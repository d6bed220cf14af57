"""Bytes to text the way a browser reads a page whose server sent no charset: a
byte-order mark, then (HTML) the charset a ``<meta>`` declares, then UTF-8 when the
bytes are valid in it, then a statistical guess (charset-normalizer, MIT: the detector
requests uses; no hand-written frequency tables).

A page in windows-1252 that declares nothing (libxslt's 142 KB all-in-one
``xslt.html``) was refused as "not valid UTF-8"; a browser shows it. As WHATWG's
Encoding standard does, the labels ``iso-8859-1``, ``latin1`` and ``ascii`` mean
windows-1252 (its 0x80-0x9F are curly quotes and dashes, not control characters), and a
``<meta>`` naming UTF-16 in an ASCII-compatible page means UTF-8.
"""

from __future__ import annotations

import codecs

from bs4.dammit import EncodingDetector
from charset_normalizer import from_bytes

from groundwire_core.errors import InvalidInput

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_WINDOWS_1252 = frozenset(
    {"iso-8859-1", "iso8859-1", "iso8859_1", "latin1", "latin-1", "latin_1", "l1", "ascii",
     "us-ascii", "cp1252", "windows-1252"}
)  # fmt: skip
_TIE = 0.01
"""Guesses whose chaos (charset-normalizer's mess ratio) is within this of the best
are equally good: among them windows-1252 wins, as a browser's default for an
undeclared Western page (on cp1252 bytes the detector ranked cp1250 first with the
same chaos, reading "naïve" as "naďve")."""


def wide_bom(content: bytes) -> bool:
    """Whether ``content`` opens with a UTF-16 or UTF-32 byte-order mark (its NUL bytes
    are text, not a sign of a binary file)."""
    return content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def _label(declared: str) -> str:
    name = declared.strip().lower()
    if name in _WINDOWS_1252:
        return "cp1252"
    if name.startswith("utf-16") or name.startswith("utf-32"):
        return "utf-8"  # the bytes that declared it are ASCII-compatible
    return name


def _decode(content: bytes, encoding: str) -> str:
    # windows-1252 leaves five bytes undefined that browsers map to C1 controls
    return content.decode(encoding, errors="replace" if encoding == "cp1252" else "strict")


def decode(content: bytes, *, html: bool) -> tuple[str, str]:
    """The text of ``content`` and the encoding it was read in. Raises InvalidInput
    when a declared charset is unknown or wrong for the bytes, or no guess fits."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            try:
                return content.decode(encoding), encoding
            except UnicodeDecodeError as error:
                raise InvalidInput(
                    f"the content starts with a {encoding} byte-order mark but is not valid "
                    f"in it (byte {error.start})"
                ) from None
    if html:
        declared = EncodingDetector.find_declared_encoding(content, is_html=True)
        if declared:
            encoding = _label(declared)
            try:
                return _decode(content, encoding), encoding
            except (UnicodeDecodeError, LookupError):
                if encoding != "utf-8":
                    raise InvalidInput(
                        f"the HTML declares charset {declared!r} but is not valid in it"
                    ) from None
    try:
        return content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as error:
        utf8_error = error.start
    matches = list(from_bytes(content))
    best = matches[0] if matches else None
    if best is not None:
        best = next(
            (
                m
                for m in matches
                if m.chaos <= best.chaos + _TIE and "cp1252" in m.could_be_from_charset
            ),
            best,
        )
    if best is None or best.encoding is None:
        raise InvalidInput(
            f"the content is not valid UTF-8 (byte {utf8_error}), declares no charset, "
            "and no encoding fits it"
        )
    encoding = _label(best.encoding)
    try:
        return _decode(content, encoding), encoding
    except (UnicodeDecodeError, LookupError):
        return str(best), best.encoding
