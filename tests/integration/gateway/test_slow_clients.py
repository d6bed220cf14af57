"""Acceptance: slow clients cannot hold the gateway's sockets. 300 connections that
send their request headers a line at a time ("slowloris"), and a few that send
nothing, are closed by a real gateway process (loopback, port 0) within its
configured header timeout, while normal requests are served meanwhile; a body that
trickles in gets 408 within the body timeout."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
SLOW = 300
SILENT = 20
# Generous for a loaded machine: a connection never cut off would stay open as long as
# it dribbles (until the scenario's 20 s bound), so under 9 s is the deadline at work.
SLACK_S = 8.0


async def _slow_headers(port: int, *, send: bool) -> float:
    """Opens a connection, dribbles header lines (or sends nothing) until the gateway
    closes it; returns the seconds it stayed open."""
    opened = time.monotonic()  # before the connect: the server's clock starts after it
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        if send:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n")
            await writer.drain()
        while True:
            try:
                data = await asyncio.wait_for(reader.read(1024), 0.25)
            except TimeoutError:
                if send:
                    writer.write(b"X-Slow: still-typing\r\n")
                    await writer.drain()
                continue
            assert not data, data  # headers never completed: no response is due
            return time.monotonic() - opened
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - opened
    finally:
        writer.close()


async def _trickling_body(port: int) -> tuple[float, bytes]:
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/search HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n" + b'{"query": '
    )
    await writer.drain()
    reply = await reader.read()  # the gateway answers and closes
    writer.close()
    return time.monotonic() - started, reply


async def _normal_traffic(url: str) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        for _ in range(10):
            for request in (
                client.get("/healthz"),
                client.post("/v1/search", json={"query": "install"}),
            ):
                started = time.monotonic()
                reply = await request
                out.append((reply.status_code, time.monotonic() - started))
            await asyncio.sleep(0.05)
    return out


async def _scenario(port: int, url: str) -> tuple[list[float], list[tuple[int, float]], Any]:
    slow = [asyncio.create_task(_slow_headers(port, send=True)) for _ in range(SLOW)]
    silent = [asyncio.create_task(_slow_headers(port, send=False)) for _ in range(SILENT)]
    body = asyncio.create_task(_trickling_body(port))
    await asyncio.sleep(0.2)  # every slow connection is open
    normal = await _normal_traffic(url)
    held = await asyncio.wait_for(asyncio.gather(*slow, *silent), timeout=20)
    return held, normal, await asyncio.wait_for(body, timeout=10)


def test_slow_clients_are_cut_off_while_others_are_served(
    gateways: Any, fake_upstream: Any
) -> None:
    (gateway,) = gateways.start(
        **fake_upstream.env(),
        HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
        BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
        SEARCH_RATE_LIMIT_PER_MIN="0",
    )
    held, normal, (body_s, body_reply) = asyncio.run(_scenario(gateway.port, gateway.url))

    assert len(held) == SLOW + SILENT
    assert min(held) >= HEADER_TIMEOUT_S - 0.05, min(held)  # the deadline, not sooner
    assert max(held) <= HEADER_TIMEOUT_S + SLACK_S, max(held)
    assert {status for status, _ in normal} == {200}
    # served (200) while the slow ones were held; their seconds are the client timeout's
    assert body_reply.startswith(b"HTTP/1.1 408"), body_reply[:80]
    assert b'"request_timeout"' in body_reply
    assert BODY_TIMEOUT_S - 0.05 <= body_s <= BODY_TIMEOUT_S + SLACK_S
    assert "closing a connection whose request headers were late" in gateway.log_tail(2000)
