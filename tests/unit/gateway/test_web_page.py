"""The web page's files as the gateway serves them: every script the page loads is one
of its own (no CDN, nothing inline, so the CSP holds), is served with a JavaScript
type, and the vendored ones carry their licences.

``make_client`` comes from conftest.py; the page in a browser is
tests/integration/gateway/test_browser.py and tests/e2e/test_chat_page.py."""

from __future__ import annotations

import re

from groundwire_gateway.routes.system import WEB_DIR
from tests.unit.gateway.conftest import ClientFactory

VENDORED = ("marked.umd.js", "purify.min.js")


async def test_the_page_loads_only_its_own_scripts_under_its_csp(
    make_client: ClientFactory,
) -> None:
    client = make_client()
    page = await client.get("/")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "unsafe" not in csp
    html = page.text
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    assert scripts, "the page has scripts"
    sources = []
    for attributes, body in scripts:
        assert not body.strip(), "no inline script: the CSP would block it"
        [src] = re.findall(r'src="([^"]+)"', attributes)
        sources.append(src)
    assert sources == [
        "/static/vendor/marked.umd.js",
        "/static/vendor/purify.min.js",
        "/static/app.js",
        "/static/upload.js",
    ]
    assert not re.search(r"\son[a-z]+=", html), "no inline event handlers"
    for src in [*sources, "/static/style.css", "/static/vendor/LICENSES.md"]:
        served = await client.get(src)
        assert served.status_code == 200, src
        if src.endswith(".js"):
            assert "javascript" in served.headers["content-type"], src
            # a source map the gateway does not serve would be a 404 in devtools
            assert "sourceMappingURL" not in served.text, src


def test_the_vendored_scripts_carry_their_licences() -> None:
    vendor = WEB_DIR / "vendor"
    notes = (vendor / "LICENSES.md").read_text()
    for name in VENDORED:
        assert name in notes
        assert (vendor / name).stat().st_size > 10_000
    assert "MIT" in (vendor / "LICENSE.marked").read_text()
    assert "Apache License" in (vendor / "LICENSE.dompurify").read_text()
    for own in ("app.js", "upload.js"):
        code = (WEB_DIR / own).read_text()
        assert "eval(" not in code and "new Function" not in code, own
