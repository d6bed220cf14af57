"""A small website served from 127.0.0.1 by a test: the standard library's HTTP
server on a free port, in a thread, answering from a dict the test changes between
crawls and recording every path it was asked for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    location: str = ""
    length: bool = True
    """Send Content-Length; without it the body ends when the connection closes."""


@dataclass
class Site:
    """``pages`` maps a path (with its query) to its reply; any other path is a 404."""

    pages: dict[str, Reply] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)
    base: str = ""

    def html(self, path: str, title: str, text: str, links: tuple[str, ...] = ()) -> None:
        anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
        body = (
            f"<!doctype html><html><head><title>{title}</title></head><body><main>"
            f"<h1>{title}</h1><p>{text}</p><ul>{anchors}</ul></main></body></html>"
        )
        self.pages[path] = Reply(body=body.encode())

    def redirect(self, path: str, to: str, status: int = 301) -> None:
        self.pages[path] = Reply(status=status, location=to)


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    """Serves ``site`` until the block ends; ``site.base`` is its http://127.0.0.1:PORT."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requested.append(self.path)
            reply = site.pages.get(self.path, Reply(status=404, body=b"not found"))
            self.send_response(reply.status)
            if reply.location:
                self.send_header("Location", reply.location)
            self.send_header("Content-Type", reply.content_type)
            if reply.length:
                self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the test reads site.requested

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
