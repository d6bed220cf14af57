"""`groundwire up`, the real command as a process, hands each service the user's
settings for it — the orchestrator's LLM, the gateway's admin keys, the reranker's
model — given once through the environment and once through ``groundwire.toml``,
and no service's environment holds another service's settings (its secrets least of
all). One cluster start per way of giving them; the `--detach`/`down` pair and the
`chat` command ride along with the file run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from groundwire_cli.config import SERVICES, prefix, service_of
from groundwire_cli.lifecycle import RunningCluster, running
from tests.e2e.fault_support import (
    FAST_MODEL,
    STRONG_MODEL,
    build_tiny_reranker,
    eventually,
    role_reply,
    sse_events,
)
from tests.fakes.llm_thread import ThreadedFakeLLM

pytestmark = pytest.mark.e2e

GROUNDWIRE = Path(sys.executable).with_name("groundwire")
"""The installed command, as a user runs it."""
ANTHROPIC_KEY = "sk-ant-fake-e2e-7d41c0"
ADMIN_KEY = "admin-e2e-key-93b2f5"
COLLECTION = "settings"
QUESTION = "how long should spaghetti cook"
DOCS = {
    "kitchen.md": "# Cooking pasta\n\nBring salted water to a rolling boil, add the spaghetti "
    "and stir. Cook it until it is al dente, after about nine minutes.",
    "rice.md": "# Boiling rice\n\nRinse the rice, cover it with water and cook it with the "
    "lid on for fifteen minutes, then let it rest as long again.",
    "garden.md": "# Pruning roses\n\nCut each cane just above an outward-facing bud in late "
    "winter, removing dead and crossing stems first.",
}
SECRETS = {"orchestrator": ANTHROPIC_KEY, "gateway": ADMIN_KEY}


Tables = dict[str, dict[str, str | int | float]]


def service_settings(llm_url: str, reranker_dir: Path, minilm_dir: Path) -> Tables:
    """What the user configures, per service (names as in the settings file)."""
    return {
        "embedder": {"model_dir": str(minilm_dir), "intra_op_threads": 1},
        "reranker": {"model_dir": str(reranker_dir), "intra_op_threads": 1},
        "orchestrator": {
            "anthropic_api_key": ANTHROPIC_KEY,
            "anthropic_base_url": llm_url,
            "anthropic_fast_model": FAST_MODEL,
            "anthropic_strong_model": STRONG_MODEL,
            "llm_order": "anthropic",
            # a random reranker: keep every scored passage and never skip it for load
            # on busy cores, so a fallback can only mean the settings never arrived
            "rerank_threshold": 0,
            "rerank_budget_ms": 0,
            "rerank_timeout_s": 6,
            # the random reranker may put rice.md first, and the scripted answer cites
            # [1] whatever it is: shown and labelled, not withheld, so the answer's mode
            # tests the settings rather than which passage came first
            "verify_before_show": "off",
        },
        "gateway": {"admin_api_keys": f"ops:{ADMIN_KEY}"},
    }


@dataclass
class Up:
    mode: str
    state: RunningCluster
    env: dict[str, str]
    """The environment the command ran with."""
    http: httpx.Client


def _toml(tables: Tables) -> str:
    lines = []
    for table, values in tables.items():
        lines.append(f"[{table}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")  # JSON strings and numbers are TOML
        lines.append("")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def llm() -> Iterator[ThreadedFakeLLM]:
    fake = ThreadedFakeLLM(role_reply)
    fake.start()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def reranker_model(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reranker(repo_root, tmp_path_factory.mktemp("reranker"))


@pytest.fixture(scope="module", params=["environment", "file"])
def up(
    request: pytest.FixtureRequest,
    llm: ThreadedFakeLLM,
    reranker_model: Path,
    minilm_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Up]:
    mode: str = request.param
    work = tmp_path_factory.mktemp(f"up-{mode}")
    home = work / "home"
    # nothing of the machine's own configuration: only what this test gives
    env = {k: v for k, v in os.environ.items() if service_of(k) is None}
    env.update(GROUNDWIRE_HOME=str(home), XDG_CONFIG_HOME=str(work / "xdg"))
    env.pop("GROUNDWIRE_CONFIG", None)
    settings = service_settings(llm.url, reranker_model, minilm_dir)
    if mode == "environment":
        for service, values in settings.items():
            env.update({prefix(service) + k.upper(): str(v) for k, v in values.items()})
        process = subprocess.Popen(
            [str(GROUNDWIRE), "up", "--free-ports"],
            env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        state = eventually(
            lambda: running(home / "run"),
            lambda s: s is not None or process.poll() is not None,
            timeout_s=240,
        )
        assert state is not None, process.communicate(timeout=30)[0].decode()
    else:
        # the reranker's folder relative to the file: the file's folder, not the cwd
        settings["reranker"]["model_dir"] = os.path.relpath(reranker_model, work)
        settings["common"] = {"shutdown_grace_s": 3}
        settings["gateway"]["request_timeout_s"] = 5
        env["GROUNDWIRE_GATEWAY_REQUEST_TIMEOUT_S"] = "7"  # the environment beats the file
        config = work / "groundwire.toml"
        config.write_text(_toml(settings))
        started = subprocess.run(
            [str(GROUNDWIRE), "up", "--free-ports", "--detach", "--config", str(config)],
            env=env, cwd="/", capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert started.returncode == 0, started.stdout + started.stderr
        assert "Groundwire is up" in started.stdout
        state = running(home / "run")
        assert state is not None
    try:
        with httpx.Client(base_url=state.gateway_url, timeout=60) as http:
            documents = [{"source_id": k, "content": v} for k, v in DOCS.items()]
            ingested = http.post(
                f"/v1/admin/collections/{COLLECTION}/documents",
                json={"documents": documents, "create_collection": True},
                headers={"authorization": f"Bearer {ADMIN_KEY}"},
                params={"wait": "true"},  # the report, not a job to follow
            )
            assert ingested.status_code == 200, ingested.text
            assert ingested.json()["ingested"] == len(DOCS)
            yield Up(mode, state, env, http)
    finally:
        if mode == "environment":
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
        else:
            stopped = subprocess.run(
                [str(GROUNDWIRE), "down"], env=env, capture_output=True, text=True, timeout=60
            )
            assert stopped.returncode == 0, stopped.stderr
            assert running(home / "run") is None


def _children(pid: int) -> dict[str, dict[str, str]]:
    """Each service process `up` started, by name, with its environment."""
    out = {}
    for child in psutil.Process(pid).children():
        name = next(s for s in SERVICES if f"groundwire_{s}" in child.cmdline())
        raw = Path(f"/proc/{child.pid}/environ").read_bytes().split(b"\0")
        out[name] = dict(item.decode().split("=", 1) for item in raw if b"=" in item)
    return out


def test_the_chat_answer_is_generated_by_the_configured_llm_after_reranking(up: Up) -> None:
    reply = up.http.post(
        "/v1/chat",
        json={"messages": [{"role": "user", "content": QUESTION}], "collection": COLLECTION},
    )
    assert reply.status_code == 200, reply.text
    events = dict(sse_events(reply.text))
    assert events["done"]["mode"] == "generated", events
    assert "nine minutes [1]" in events["done"]["answer"]
    stages = {s["name"]: s for s in events["stages"]["stages"]}
    assert stages["rerank"]["fallback"] is False, stages["rerank"]
    assert stages["analysis"]["fallback"] is False, stages["analysis"]


def test_the_admin_route_takes_the_configured_key_and_only_it(up: Up) -> None:
    path = f"/v1/admin/collections/{COLLECTION}/documents"
    body = {"documents": [{"source_id": "extra.md", "content": "# Extra\n\nMore text."}]}
    wrong = up.http.post(path, json=body, headers={"authorization": "Bearer not-the-key-1"})
    assert wrong.status_code == 401, wrong.text
    right = up.http.post(path, json=body, headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert right.status_code == 202, right.text  # queued as a job


def test_no_child_holds_another_services_settings(up: Up) -> None:
    children = _children(up.state.pid)
    assert sorted(children) == sorted(SERVICES)
    for name, env in children.items():
        others = [k for k in env if service_of(k) not in (None, name)]
        assert others == [], f"{name} holds {others}"
        blob = "\0".join(f"{k}={v}" for k, v in env.items())
        for owner, secret in SECRETS.items():
            holds = secret in blob
            assert holds == (owner == name), f"{owner}'s secret in {name}'s environment: {holds}"
    assert children["orchestrator"]["GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY"] == ANTHROPIC_KEY
    assert children["reranker"]["GROUNDWIRE_RERANKER_INTRA_OP_THREADS"] == "1"
    if up.mode == "file":
        assert all(env[prefix(n) + "SHUTDOWN_GRACE_S"] == "3" for n, env in children.items())
        assert children["gateway"]["GROUNDWIRE_GATEWAY_REQUEST_TIMEOUT_S"] == "7"


def test_the_chat_command_finds_the_running_cluster(up: Up) -> None:
    asked = subprocess.run(
        [str(GROUNDWIRE), "chat", QUESTION, "--collection", COLLECTION],
        env=up.env, cwd="/", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "mode: GENERATED" in asked.stdout
    assert re.search(r"\[1\] (SUPPORTED|UNSUPPORTED|SIMILAR|UNRELATED|QUOTED) ", asked.stdout)
    assert "fallback" not in next(ln for ln in asked.stdout.splitlines() if "rerank" in ln)
