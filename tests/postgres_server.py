"""A real PostgreSQL server as a child process on a free loopback port, for the tests
of the system of record (Debian's ``postgresql`` package: ``initdb`` + ``postgres``,
started by the test as ``redis-server`` is). Runs as the ``postgres`` system user when
the tests run as root (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from groundwire_cli.cluster import free_port

PASSWORD = "groundwire-test"


def _bin(name: str) -> str:
    """``name`` from PATH, else from Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in versions:
        if (folder / name).exists():
            return str(folder / name)
    raise RuntimeError(f"{name} not found: apt-get install postgresql (scripts/ci_system_deps.sh)")


class PostgresServer:
    """A throw-away cluster in ``workdir``; stop() and start() keep the port and data."""

    def __init__(self, workdir: Path | None = None) -> None:
        self.port = free_port()
        # not under pytest's tmp_path: its folders are 0700 root, and the server runs as
        # the postgres user when the tests run as root
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="groundwire-pg-"))
        self.data = self.workdir / "pgdata"
        self.process: subprocess.Popen[bytes] | None = None
        self._user = "postgres" if os.geteuid() == 0 else None

    def url(self, database: str = "groundwire") -> str:
        return f"postgresql://groundwire:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def _as_user(self) -> dict[str, object]:
        if self._user is None:
            return {}
        entry = pwd.getpwnam(self._user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _chown(self, path: Path) -> None:
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def init(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        self._chown(self.workdir)
        pwfile = self.workdir / "pw"
        pwfile.write_text(PASSWORD)
        self._chown(pwfile)
        subprocess.run(
            [
                _bin("initdb"),
                "-D",
                str(self.data),
                "-U",
                "groundwire",
                "--pwfile",
                str(pwfile),
                "-A",
                "scram-sha-256",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale",
                "C",
            ],
            check=True,
            capture_output=True,
            cwd=self.workdir,
            **self._as_user(),  # type: ignore[call-overload]
        )

    def start(self) -> None:
        if not self.data.exists():
            self.init()
        log = self.workdir / "postgres.log"
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    _bin("postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.workdir}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                **self._as_user(),  # type: ignore[call-overload]
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, log.read_text()
            if self._accepting():
                self.createdb("groundwire")
                return
            time.sleep(0.1)
        raise RuntimeError("postgres did not accept connections within 30 s")

    def _accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        ready = subprocess.run(
            [_bin("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
        )
        return ready.returncode == 0

    def createdb(self, name: str) -> None:
        """Creates database ``name`` unless it exists."""
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        subprocess.run(
            [_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "groundwire", name],
            env=env,
            capture_output=True,
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def remove(self) -> None:
        """Stops the server and deletes its folder."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def fresh_database(self) -> str:
        """The URL of a new, empty database on this server."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.createdb(name)
        return self.url(name)
