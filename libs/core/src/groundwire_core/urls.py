"""Which URLs a citation may link to.

A source's URL is rendered as a link by the web page, the document view and any
client: only an absolute http(s) URL is safe there (``javascript:`` and ``data:``
run, a relative one points into the gateway). The gateway refuses others at its
edge; the retriever refuses them from gRPC callers and drops them from what a
document declares (front matter, canonical link).
"""

from __future__ import annotations

import re

WEB_URL_PATTERN = (
    r"^[Hh][Tt][Tt][Pp][Ss]?://"
    r"(?:[^\x00-\x20\x7f/?#\[\]]+|\[[0-9A-Fa-f:.]+\])"
    r"[^\x00-\x20\x7f]*$"
)
"""An absolute http(s) URL: a host (a name, an IPv4 address or a bracketed IPv6 one
such as ``[::1]``), no space or control character. Written with explicit ranges, not
``\\s``, so Python and JSON Schema (ECMA) read it alike."""
_WEB_URL = re.compile(WEB_URL_PATTERN)


def is_web_url(value: str) -> bool:
    """An absolute http(s) URL with a host and no whitespace."""
    return _WEB_URL.match(value) is not None
