"""The retriever's readiness follows its store: a real retriever on a real port, its
health re-checked every 50 ms, its data folder taken away and given back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groundwire_core.grpc.client import check_health, create_channel
from groundwire_core.grpc.server import serving
from groundwire_retriever.server import RetrieverService
from groundwire_retriever.settings import RetrieverSettings

SERVICE_NAME = "groundwire.retriever.v1.RetrieverService"


async def _until(channel, name: str, wanted: bool) -> None:  # type: ignore[no-untyped-def]
    for _ in range(200):
        ok, _, _ = await check_health(channel, name, timeout_s=2)
        if ok == wanted:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"health of {name or '(server)'} never became {wanted}")


async def test_readiness_follows_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = RetrieverSettings(
        port=0,
        data_path=data,
        embedder_addr="127.0.0.1:9",  # never called: no ingest here
        health_check_interval_s=0.05,
    )
    async with (
        serving(RetrieverService(settings), settings) as port,
        create_channel(f"127.0.0.1:{port}") as channel,
    ):
        await _until(channel, SERVICE_NAME, True)
        data.rename(tmp_path / "elsewhere")
        await _until(channel, SERVICE_NAME, False)
        ok, _, _ = await check_health(channel, "", timeout_s=2)
        assert ok  # liveness: the process is fine, nothing to restart
        (tmp_path / "elsewhere").rename(data)
        await _until(channel, SERVICE_NAME, True)
