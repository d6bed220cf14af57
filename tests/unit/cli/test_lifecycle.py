"""`groundwire down` and the state file `groundwire up` leaves while it runs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from groundwire_cli.__main__ import main
from groundwire_cli.cluster import free_port
from groundwire_cli.lifecycle import STATE_NAME, down, notes_since, running


def test_a_state_file_of_a_gone_process_is_stale_and_removed(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    state = tmp_path / STATE_NAME
    state.write_text(json.dumps({"pid": gone.pid, "gateway_url": "http://x", "ports": {}}))
    assert running(tmp_path) is None
    assert not state.exists()


def test_down_stops_the_process_the_state_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / STATE_NAME).write_text(
            json.dumps({"pid": sleeper.pid, "gateway_url": "http://127.0.0.1:1", "ports": {}})
        )
        found = running(tmp_path)
        assert found is not None and found.pid == sleeper.pid
        # our own child: reap it as it ends, or it lingers as a zombie that looks alive
        threading.Thread(target=sleeper.wait, daemon=True).start()
        assert down(tmp_path, timeout_s=10) == 0
        assert sleeper.poll() is not None
        assert "stopped Groundwire" in capsys.readouterr().out
    finally:
        sleeper.kill()
        sleeper.wait()


def test_down_with_nothing_running_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert down(tmp_path) == 1
    assert "not running" in capsys.readouterr().err


def test_chat_with_no_gateway_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens on it
    monkeypatch.setenv("GROUNDWIRE_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["chat", "anything?", "--gateway", f"http://127.0.0.1:{port}"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error (gateway): no gateway answers at http://127.0.0.1:{port}")
    assert "groundwire up --detach" in err and "Traceback" not in err


def test_detach_relays_the_notes_of_its_own_start_only(tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    log.write_text("note: groundwire up assigns gateway GROUNDWIRE_GATEWAY_PORT=9000 (uses 8080)\n")
    start = log.stat().st_size  # an earlier start's lines stay behind the offset
    with log.open("a") as out:
        out.write(
            "note: groundwire up assigns gateway GROUNDWIRE_GATEWAY_PORT=8091 (uses 8080)\n"
            "starting 5 services; logs in /x/logs\n"
        )
    assert notes_since(log, start) == [
        "note: groundwire up assigns gateway GROUNDWIRE_GATEWAY_PORT=8091 (uses 8080)"
    ]
