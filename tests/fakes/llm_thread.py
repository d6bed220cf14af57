"""The fake LLM server (``tests.fakes.llm_server``) on an event loop of its own thread,
for synchronous tests that drive real service processes: it can be stopped
(connections refused) and started again on the same port while the orchestrator keeps
its configuration, and its recorded requests are readable from the test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from groundwire_cli.cluster import free_port
from tests.fakes.llm_server import FakeLLMServer, ScriptItem

T = TypeVar("T")


class ThreadedFakeLLM:
    """``FakeLLMServer(default=default)`` on a fixed free port; ``start`` to serve."""

    def __init__(self, default: ScriptItem) -> None:
        self.port = free_port()
        self._default = default
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: FakeLLMServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def start(self) -> ThreadedFakeLLM:
        async def start() -> FakeLLMServer:
            return await FakeLLMServer(default=self._default, port=self.port).start()

        self._server = self._run(start())
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            self._run(server.stop())

    @property
    def server(self) -> FakeLLMServer:
        """The running server (its recorded requests and disconnects)."""
        if self._server is None:
            raise RuntimeError("the fake LLM is stopped")
        return self._server

    @property
    def served(self) -> int:
        """Requests the running server received."""
        return len(self._server.requests) if self._server is not None else 0

    @property
    def running(self) -> bool:
        return self._server is not None

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
