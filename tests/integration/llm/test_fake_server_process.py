"""The fake LLM server as its own process (as load and end-to-end tests run it): a
JSON script, a ready file, delays, the log over HTTP, a clean SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from groundwire_core.errors import Overloaded
from groundwire_orchestrator.llm.base import ChatMessage, LLMRequest, TextDelta
from tests.fakes.llm_server import FakeLLMServer
from tests.integration.llm.conftest import make_provider

SCRIPT = Path(__file__).resolve().parents[2] / "fakes" / "llm_server.py"
REQUEST = LLMRequest(system="system rule", messages=(ChatMessage("user", "q"),))


@pytest.fixture
async def fake_process(tmp_path: Path) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    ready = tmp_path / "ready"
    log = (tmp_path / "fake.log").open("wb")
    script = json.dumps([{"text": "scripted first answer"}, {"status": 529}])
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        "--port", "0",
        "--ready-file", str(ready),
        "--script", script,
        "--ttft-s", "0.3",
        "--token-delay-s", "0.01",
        "--default-text", "the default answer",
        stdout=log,
        stderr=log,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert process.returncode is None, (tmp_path / "fake.log").read_text()
        assert time.monotonic() < deadline, "the fake server was not ready in 30 s"
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{int(ready.read_text())}", process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 10)
        log.close()


async def test_scripted_process_serves_both_apis(
    fake_process: tuple[str, asyncio.subprocess.Process],
) -> None:
    url, process = fake_process
    # make_provider only needs the URLs of a server
    addressed = FakeLLMServer(port=int(url.rsplit(":", 1)[1]))
    claude = make_provider("anthropic", addressed)
    local = make_provider("openai", addressed)
    try:
        start = time.monotonic()
        stream = claude.stream(REQUEST, timeout_s=10)
        first = await stream.__anext__()
        assert time.monotonic() - start >= 0.3  # --ttft-s
        rest = [e async for e in stream]
        text = "".join(e.text for e in [first, *rest] if isinstance(e, TextDelta))
        assert text == "scripted first answer"
        with pytest.raises(Overloaded):
            await local.complete(REQUEST, timeout_s=10)  # the 529 from the script
        assert await local.complete(REQUEST, timeout_s=10) == "the default answer"
    finally:
        await claude.aclose()
        await local.aclose()

    async with aiohttp.ClientSession() as session, session.get(f"{url}/_fake/log") as resp:
        log = await resp.json()
    assert [r["api"] for r in log["requests"]] == ["anthropic", "openai", "openai"]
    assert log["requests"][0]["body"]["system"] == "system rule"
    assert log["completed"] == 2

    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_replies_can_be_pushed_to_a_running_process(
    fake_process: tuple[str, asyncio.subprocess.Process],
) -> None:
    url, _ = fake_process
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}/_fake/reset") as resp:
            assert resp.status == 200
        async with session.post(f"{url}/_fake/script", json=[{"json": {"ok": True}}]) as resp:
            assert (await resp.json())["script_left"] == 1
        body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
            answer = await resp.json()
    assert json.loads(answer["choices"][0]["message"]["content"]) == {"ok": True}
