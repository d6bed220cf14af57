"""One Groundwire gRPC service as a child process, for the benchmarks.

``python -m groundwire_<name>`` binds port 0 and writes the port it got to a ready
file once it is SERVING; this waits for that file and stops the process with SIGTERM
(its graceful shutdown), then SIGKILL after 30 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


class ServiceProcess:
    """``python -m groundwire_<name>`` with ``settings`` (names without the service's
    ``GROUNDWIRE_<NAME>_`` prefix), logging to ``workdir/<name>.log``.

    ``inherit_settings=False`` drops the service's settings found in this process's
    environment, so only the defaults and ``settings`` apply.
    """

    def __init__(
        self,
        name: str,
        settings: Mapping[str, str],
        workdir: Path,
        *,
        inherit_settings: bool = True,
        timeout_s: float = 300.0,
    ) -> None:
        self.name = name
        prefix = f"GROUNDWIRE_{name.upper()}_"
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"{name}.log"
        ready = workdir / f"{name}.ready"
        ready.unlink(missing_ok=True)
        env = {
            k: v for k, v in os.environ.items() if inherit_settings or not k.startswith(prefix)
        }
        own = {"HOST": "127.0.0.1", "PORT": "0", "READY_FILE": str(ready), **settings}
        env.update({prefix + key: value for key, value in own.items()})
        env["PYTHONUNBUFFERED"] = "1"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", f"groundwire_{name}"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the {name} did not start; its log ends with:\n{tail}")
            time.sleep(0.05)
        self.port = int(ready.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
