"""Small TCP servers on 127.0.0.1 for the outbound-fetch tests, in the test's own event
loop: an HTTP server that records each request's path and headers, a body that never
ends (counting what it sent), a port that speaks something other than HTTP, and one
that accepts and never answers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
ENDLESS_STOP = 256 * 1024 * 1024
"""An endless body stops here (a client that buffers everything would read it all)."""


@dataclass
class Request:
    path: str
    headers: dict[str, str]


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "text/html"})


@dataclass
class Recorder:
    """What an HTTP server was asked; ``sent`` counts the bytes of an endless body."""

    requests: list[Request] = field(default_factory=list)
    sent: int = 0


async def read_request(reader: asyncio.StreamReader) -> Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return Request(path, headers)


def http(pages: dict[str, Answer], recorder: Recorder) -> Handler:
    """Answers each path from ``pages`` (404 otherwise), one request per connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        recorder.requests.append(request)
        answer = pages.get(request.path, Answer(404, b"not found"))
        head = [f"HTTP/1.1 {answer.status} X", f"content-length: {len(answer.body)}"]
        head += [f"{k}: {v}" for k, v in answer.headers.items()]
        writer.write(("\r\n".join(head) + "\r\nconnection: close\r\n\r\n").encode() + answer.body)
        await writer.drain()

    return handle


def endless(recorder: Recorder, content_type: str = "text/html") -> Handler:
    """A 200 with no length whose body goes on until the client hangs up (or
    ENDLESS_STOP); ``recorder.sent`` counts the body bytes written."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        recorder.requests.append(await read_request(reader))
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n\r\n".encode())
        chunk = b"<p>" + b"zebra " * 10_000 + b"</p>\n"
        try:
            while recorder.sent < ENDLESS_STOP:
                writer.write(chunk)
                recorder.sent += len(chunk)
                await writer.drain()
        except ConnectionError:
            pass

    return handle


async def banner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An open port that speaks another protocol (an SSH banner), then hangs up."""
    writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
    await writer.drain()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An open port that accepts and never answers."""
    await reader.read()  # until the client gives up and hangs up


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[int]:
    """Serves ``handler`` on 127.0.0.1 until the block ends; yields the port. Every
    connection is closed and its handler finished when the block ends."""
    running: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        running.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up first
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            running.discard(task)

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield int(port)
    finally:
        server.close()
        for task in list(running):
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await server.wait_closed()


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
