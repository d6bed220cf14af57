"""python -m groundwire_gateway: serve the HTTP API with uvicorn."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import uvicorn

from groundwire_core.logs import configure_logging
from groundwire_core.telemetry import setup_telemetry
from groundwire_gateway.app import create_app
from groundwire_gateway.protocol import h11_protocol
from groundwire_gateway.settings import GatewaySettings

log = logging.getLogger("groundwire.gateway")


async def _serve(settings: GatewaySettings) -> None:
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,  # keep our log format (request and trace ids)
        timeout_graceful_shutdown=int(settings.shutdown_grace_s),
        access_log=False,
        # X-Forwarded-For decides the client address (rate limits) only from these
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=settings.forwarded_allow_ips or None,
        # h11 with a deadline on request headers (slow-header clients are cut off)
        http=h11_protocol(settings.header_timeout_s),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn exposes a flag, no event)
        await asyncio.sleep(0.05)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        log.info("gateway SERVING on http://%s:%d", settings.host, port)
        if settings.ready_file:
            ready = Path(settings.ready_file)
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(str(port))
            tmp.replace(ready)
    await task
    if not server.started:
        raise SystemExit(1)


def main() -> None:
    settings = GatewaySettings()
    configure_logging(settings, "gateway")
    provider = setup_telemetry(settings, "gateway")
    try:
        asyncio.run(_serve(settings))
    finally:
        provider.shutdown()


if __name__ == "__main__":
    main()
