"""The fake LLM as its own process: ``tests/fakes/llm_server.py`` (the one fake of the
LLM APIs), answering the orchestrator's prompts (``--orchestrator-answers``) with
settable time to first token and per-token delay, so the load is on our stack, not on
a paid API. The benchmark starts it by path and never imports the tests."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loadrun.inputs import ROOT

FAKE_LLM_SCRIPT = ROOT / "tests" / "fakes" / "llm_server.py"


@dataclass
class FakeLLM:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_fake_llm(
    run_dir: Path,
    ttft_s: float,
    token_delay_s: float,
    answer_words: int,
    quote: bool,
    host: str = "127.0.0.1",
) -> FakeLLM:
    """The fake LLM as its own process on ``host`` (``0.0.0.0`` for containers to reach
    it through the host's address)."""
    ready = run_dir / "fake-llm.ready"
    log_path = run_dir / "logs" / "fake-llm.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    ready.unlink(missing_ok=True)  # a kept run folder's old file names a dead port
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(FAKE_LLM_SCRIPT),
                "--ready-file",
                str(ready),
                "--ttft-s",
                str(ttft_s),
                "--token-delay-s",
                str(token_delay_s),
                "--orchestrator-answers",
                str(answer_words),
                "--keep-log",
                "100",
                "--host",
                host,
                *(["--quote"] if quote else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the fake LLM did not start; see {log_path}")
        time.sleep(0.05)
    return FakeLLM(process, int(ready.read_text()), log_path)
