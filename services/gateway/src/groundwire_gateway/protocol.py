"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on request headers.

uvicorn bounds only the idle time between keep-alive requests
(``timeout_keep_alive``, cancelled by the first byte that arrives); a client that
opens a connection and sends its headers a byte at a time ("slowloris") holds the
socket forever. This subclass gives every request ``header_timeout_s`` to deliver
its complete headers, counted from the connection's opening or, between keep-alive
requests, from the first byte of the next request; past it the connection is
closed. The body's deadline is the app's (``RequestContextMiddleware``): it is an
ASGI concern, and answering 408 needs the app.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderDeadlineProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request headers are late."""

    header_timeout_s = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def _waiting_for_headers(self) -> bool:
        # no request yet on this connection, or the last one has been answered
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(
                self.header_timeout_s, self._headers_late, self.cycle
            )

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing at all is covered too

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()  # between keep-alive requests: from the first byte
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()  # a request started: its headers are complete

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _headers_late(self, cycle: object) -> None:
        self._header_deadline = None
        if self.cycle is cycle and self._waiting_for_headers() and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers were late")
            self.transport.close()


def h11_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)`` with this header deadline."""
    return type(
        "HeaderDeadlineProtocol",
        (HeaderDeadlineProtocol,),
        {"header_timeout_s": header_timeout_s},
    )
