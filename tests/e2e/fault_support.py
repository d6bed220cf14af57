"""What the fault matrix runs besides the five services: a real ``redis-server`` that
stops and starts on the same port, the fake Anthropic API on its own thread (stopped
and started on the same port) answering each model role as a real model would, a
tiny cross-encoder for the reranker, and readers for the gateway's SSE and health."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from groundwire_cli.cluster import free_port
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply

T = TypeVar("T")

FAST_MODEL = "fake-fast"
STRONG_MODEL = "fake-strong"


class RedisProcess:
    """A real redis-server on a free loopback port; stop() and start() keep the port."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "redis.log").open("ab") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
                 "--loglevel", "warning"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.ping():
            assert self.process.poll() is None, (self.workdir / "redis.log").read_text()
            assert time.monotonic() < deadline, "redis-server did not answer PING in 10 s"
            time.sleep(0.02)

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


_QUERY = re.compile(r"<query>\s*(.*?)\s*</query>", re.S)


def role_reply(request: RecordedRequest) -> Reply:
    """What a model would answer: the fast model (analysis) returns the analysis JSON
    with the query unchanged, so retrieval matches a run without an LLM; the strong
    model answers in one sentence citing excerpt [1]."""
    body = request.body
    if body.get("model") == FAST_MODEL:
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(p.get("text", "") for p in last)
        match = _QUERY.search(text)
        query = match.group(1) if match else text
        return Reply(
            json={
                "rewritten_query": query,
                "hyde_document": query,
                "intent": "find the answer",
                "filters": [],
                "negatives": [],
            }
        )
    return Reply(text="According to the documentation, it takes about nine minutes [1].")


class ThreadedFakeLLM:
    """The fake Anthropic API served by an event loop on its own thread, so a
    synchronous test can stop it (connections refused) and start it again on the same
    port while the orchestrator keeps its configuration."""

    def __init__(self) -> None:
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server: FakeLLMServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def start(self) -> None:
        async def start() -> FakeLLMServer:
            return await FakeLLMServer(default=role_reply, port=self.port).start()

        self._server = self._run(start())

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            self._run(server.stop())

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


def corpus_sentences(repo_root: Path) -> list[str]:
    """Sentences of our own docs: the tiny reranker's tokenizer training text."""
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in sorted((repo_root / "samples" / "corpus").glob("*.md"))
    )
    sentences = [s.strip(" #*-`>|") for s in re.split(r"(?<=[.!?])\s+|\n+", text)]
    return [s for s in sentences if len(s) > 20]


def build_tiny_reranker(repo_root: Path, workdir: Path) -> Path:
    """A random two-layer BERT cross-encoder exported by the project's build command
    (real serving mechanics, meaningless scores). Returns the model folder."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint("bert", workdir / "checkpoint", corpus_sentences(repo_root))
    report = build_profile(
        "cross-encoder", workdir / "model", source=checkpoint, log=lambda _: None
    )
    return Path(report.out_dir)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each event in a text/event-stream body."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def eventually(
    probe: Callable[[], T], done: Callable[[T], bool], *, timeout_s: float, every_s: float = 0.2
) -> T:
    """Calls ``probe`` until ``done`` accepts its value or ``timeout_s`` passes; returns
    the last value either way (the caller asserts on it, so a failure shows it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(every_s)
