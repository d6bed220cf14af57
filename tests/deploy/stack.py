"""The compose stack for real: docker-compose.yml through podman-compose, a user's journey
over HTTP against the gateway container, then faults (SIGKILL of each container during an
ingest job and during chats, a dependency stopped, `down` + `up` with the volumes kept).

Run by tests/deploy/run.sh (`make deploy-test`) after it built the images; it prints one
line per step and the counts at the end, and exits non-zero on the first broken promise.
The compose file runs with its own read_only, user, volumes, env and health checks: the
only inputs are an env file (the keys and passwords .env would hold, the sources folder,
free host ports) and the project name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ADMIN = "deploytest-admin-key-0123456789"
TOKEN = "deploytest-service-token-0123456789"
COLLECTION = "kb"
SYNCED_COLLECTION = "garden"
CHAT_PAUSE_S = 1.0
# How long the restart policy gets to bring a killed container back (it acts in ~1 s)
POLICY_GRACE_S = 15.0
FAULT_DOCS = 12  # documents of the ingest job under way at each kill
# The serving containers a user's request crosses, and the stores, killed in turn.
KILLED = ("postgres", "redis", "embedder", "reranker", "retriever", "orchestrator", "gateway")
SERVING = ("embedder", "reranker", "retriever", "orchestrator", "gateway")

DOCS = {
    "noodles.md": "# Noodles\n\nBoil the noodles for nine minutes in salted water, then "
    "rinse them in cold water so they stop cooking.",
    "kettle.md": "# Kettle\n\nDescale the kettle every month with a cup of white vinegar "
    "and a litre of water; rinse twice before boiling water for tea.",
    "bikes.md": "# Bicycles\n\nPump the tyres of the bicycle to four bar before a long ride "
    "and oil the chain every two hundred kilometres.",
}
SYNCED = {
    "garden/tomatoes.md": "# Tomatoes\n\nWater the tomato plants at their roots every "
    "morning and pinch out the side shoots once a week.",
    "garden/roses.md": "# Roses\n\nPrune the roses in late winter, just above an outward "
    "facing bud, and feed them after the first flowers.",
}


def log(message: str) -> None:
    print(f"[deploy-test {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Failed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


class Stack:
    def __init__(self, work: Path, project: str, http_port: int, grpc_port: int) -> None:
        self.work = work
        self.project = project
        self.env_file = work / "compose.env"
        self.sources = work / "sources"
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.url = f"http://127.0.0.1:{http_port}"
        compose = shutil.which("podman-compose") or str(
            Path(sys.executable).parent / "podman-compose"
        )
        self.compose_cmd = [
            compose,
            "-p",
            project,
            "--env-file",
            str(self.env_file),
            "-f",
            str(COMPOSE),
        ]

    def write_inputs(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.env_file.write_text(
            "\n".join(
                [
                    f"GROUNDWIRE_GATEWAY_ADMIN_API_KEYS=ops:{ADMIN}",
                    f"GROUNDWIRE_SERVICE_TOKEN={TOKEN}",
                    "GROUNDWIRE_POSTGRES_PASSWORD=deploytest-postgres-password",
                    f"GROUNDWIRE_SOURCES={self.sources}",
                    f"GROUNDWIRE_GATEWAY_HOST_PORT={self.http_port}",
                    f"GROUNDWIRE_RETRIEVER_HOST_PORT={self.grpc_port}",
                    # podman 4.3 does not know Docker's "host-gateway"
                    "GROUNDWIRE_HOST_GATEWAY=10.88.0.1",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        for rel, text in SYNCED.items():
            path = self.sources / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        # the retriever runs as uid 10001: the mounted folder must be readable by others
        for path in [self.sources, *self.sources.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)

    def compose(self, *args: str, check_rc: bool = True, timeout: float = 900) -> str:
        done = subprocess.run(
            [*self.compose_cmd, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check_rc and done.returncode != 0:
            raise Failed(
                f"podman-compose {' '.join(args)}: rc={done.returncode}\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done.stdout + done.stderr

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def podman(self, *args: str, check_rc: bool = True) -> str:
        done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)
        if check_rc and done.returncode != 0:
            raise Failed(f"podman {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout.strip()

    def state(self, service: str) -> dict[str, Any]:
        out = self.podman("inspect", "--format", "json", self.container(service), check_rc=False)
        try:
            return dict(json.loads(out)[0]["State"])
        except (ValueError, IndexError, KeyError):
            return {}

    def healthy(self, service: str) -> bool:
        """Runs the container's own health check now (podman schedules them with systemd
        timers, which this machine lacks): the same command compose declares."""
        if not self.state(service).get("Running"):
            return False
        done = subprocess.run(
            ["podman", "healthcheck", "run", self.container(service)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode == 0

    def wait_healthy(self, services: tuple[str, ...], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        pending = list(services)
        while pending and time.monotonic() < deadline:
            pending = [s for s in pending if not self.healthy(s)]
            if pending:
                time.sleep(2)
        check(not pending, f"not healthy after {timeout:.0f}s: {pending}")

    def up(self) -> None:
        started = time.monotonic()
        self.compose("up", "-d")
        self.wait_healthy(("postgres", "redis", *SERVING))
        self.wait_http()
        log(f"stack up and healthy in {time.monotonic() - started:.0f}s")

    def down(self, volumes: bool = False) -> None:
        self.compose("down", *(["-v"] if volumes else []), check_rc=False)

    def wait_http(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise Failed(f"{self.url}/v1/health not 200 after {timeout:.0f}s")

    def sigkill(self, service: str) -> int:
        """SIGKILL the container's PID 1 from the host (as the OOM killer would): the
        restart policy (unless-stopped) brings it back, not the test."""
        pid = int(self.podman("inspect", "--format", "{{.State.Pid}}", self.container(service)))
        check(pid > 0, f"{service} is not running")
        os.kill(pid, 9)
        return pid

    def wait_restarted(self, service: str, old_pid: int, timeout: float = 240) -> str:
        """Waits for the container to run again and pass its health check. The restart
        policy brings back a container with no `depends_on`; podman 4.3's does not act
        for one whose --requires names an exited one-shot (models, migrate): after
        POLICY_GRACE_S the test starts it as an operator would, and says so."""
        started = time.monotonic()
        deadline = started + timeout
        how = "restart policy"
        while time.monotonic() < deadline:
            st = self.state(service)
            if st.get("Running") and st.get("Pid") not in (0, old_pid):
                break
            if time.monotonic() - started > POLICY_GRACE_S and not st.get("Running"):
                how = "podman start (podman 4.3's policy skips containers with --requires)"
                self.podman("start", self.container(service), check_rc=False)
            time.sleep(1)
        self.wait_healthy((service,), timeout=max(30.0, deadline - time.monotonic()))
        return how


# --- the API, as a user calls it -------------------------------------------------------


def admin_headers() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def wait_job(http: httpx.Client, job_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            r = http.get(f"/v1/admin/jobs/{job_id}", headers=admin_headers())
            if r.status_code == 200:
                job = r.json()
                if job["state"] not in ("queued", "running"):
                    return job
        except httpx.HTTPError:
            pass  # the gateway itself may be the container just killed
        time.sleep(0.5)
    raise Failed(f"job {job_id} not terminal after {timeout:.0f}s: {job.get('state')}")


def job_once_more(http: httpx.Client, start: Callable[[], str], what: str) -> dict[str, Any]:
    """A journey's job to its end, started again once when it failed on a dependency
    (the journey runs with nothing killed, but podman 4.3's network DNS once answered
    "Temporary failure in name resolution" for 40 s right after the stack was healthy:
    the job failed "the job store cannot be read or written (gaierror)", as a job must
    when its store is gone). A user resubmits a failed job; so does the journey, once,
    and says so. A second failure, or any other, fails the test."""
    job = wait_job(http, start())
    error = str(job.get("error", ""))
    transient = "cannot be read or written" in error or "unavailable" in error
    if job["state"] == "failed" and transient:
        log(f"journey: {what} job {job['id']} failed on a dependency ({error[:120]}); once more")
        job = wait_job(http, start())
    return job


def ingest(http: httpx.Client, docs: dict[str, str], create: bool = False) -> str:
    body = {
        "documents": [{"source_id": k, "content": v} for k, v in docs.items()],
        "create_collection": create,
    }
    r = http.post(
        f"/v1/admin/collections/{COLLECTION}/documents", json=body, headers=admin_headers()
    )
    check(r.status_code == 202, f"ingest: {r.status_code} {r.text[:300]}")
    return str(r.json()["job"]["id"])


def chat(http: httpx.Client, key: str, question: str) -> dict[str, Any]:
    """POST /v1/chat (SSE) read to its end: the events by name."""
    events: dict[str, Any] = {}
    body = {"messages": [{"role": "user", "content": question}], "collection": COLLECTION}
    with http.stream("POST", "/v1/chat", json=body, headers=bearer(key)) as r:
        if r.status_code != 200:
            r.read()
            return {"http_error": r.status_code, "body": r.json()}
        name = "message"
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.setdefault(name, []).append(json.loads(line.split(":", 1)[1]))
    return events


def typed_error(body: Any) -> bool:
    """The gateway's one error body: {"error": {"code": ..., "message": ...}}."""
    return (
        isinstance(body, dict)
        and isinstance(body.get("error"), dict)
        and bool(body["error"].get("code"))
    )


async def mcp_calls(url: str, key: str) -> dict[str, Any]:
    import httpx2
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, Any] = {}
    async with (
        httpx2.AsyncClient(headers=bearer(key), timeout=120) as http,
        McpClient(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        for name, arguments in (
            ("search", {"query": "how long do noodles boil", "collection": COLLECTION}),
            ("ask", {"question": "How long should noodles boil?", "collection": COLLECTION}),
        ):
            result = await client.call_tool(name, arguments)
            check(not result.is_error, f"MCP {name}: {result.content}")
            out[name] = result.structured_content
    return out


# --- the journey -----------------------------------------------------------------------


def read_key(http: httpx.Client, name: str) -> str:
    r = http.post(
        "/v1/admin/keys",
        json={"tenant": "ops", "role": "read", "name": name},
        headers=admin_headers(),
    )
    check(r.status_code in (200, 201), f"create key: {r.status_code} {r.text[:300]}")
    return str(r.json()["key"])


def journey(stack: Stack, http: httpx.Client) -> dict[str, Any]:
    key = read_key(http, "reader")
    log("journey: created a read key")

    job = job_once_more(http, lambda: ingest(http, DOCS, create=True), "ingest")
    check(job["state"] == "succeeded", f"ingest job: {job}")
    log(f"journey: ingest job {job['id']} succeeded ({job['counts']})")

    # a sync mirrors the folder into its collection (what is not in it is deleted): its own
    r = http.post(
        "/v1/admin/collections", json={"name": SYNCED_COLLECTION}, headers=admin_headers()
    )
    check(r.status_code in (200, 201), f"create collection: {r.status_code} {r.text[:300]}")

    def sync() -> str:
        r = http.post(
            f"/v1/admin/collections/{SYNCED_COLLECTION}/sync",
            json={"source": "/sources/garden"},
            headers=admin_headers(),
        )
        check(r.status_code == 202, f"sync: {r.status_code} {r.text[:300]}")
        return str(r.json()["job"]["id"])

    sync_job = job_once_more(http, sync, "sync")
    check(sync_job["state"] == "succeeded", f"sync job: {sync_job}")
    log(f"journey: folder sync of /sources/garden succeeded ({sync_job['counts']})")

    r = http.post(
        "/v1/search",
        json={"query": "when to prune roses", "collection": SYNCED_COLLECTION},
        headers=bearer(key),
    )
    check(r.status_code == 200, f"search: {r.status_code} {r.text[:300]}")
    top = r.json()["results"][0]["source_id"]
    check(top.endswith("roses.md"), f"search's top result: {top}")
    log(f"journey: search found the synced file first ({top})")

    events = chat(http, key, "How long should noodles boil?")
    check("http_error" not in events and "done" in events, f"chat: {events}")
    cited = events["citations"][0]
    sources = cited["sources"]
    check(any(s["source_id"] == "noodles.md" for s in sources), f"chat sources: {sources}")
    answer = "".join(e.get("text", "") for e in events.get("token", []) + events.get("delta", []))
    conversation = str(events["done"][0].get("conversation_id") or "")
    check(bool(conversation), f"chat stored no conversation: {events['done']}")
    log(
        f"journey: chat answered with {len(cited['citations'])} citation(s) ({answer[:60]!r}…), "
        f"stored as conversation {conversation}"
    )

    source = next(s for s in sources if s["source_id"] == "noodles.md")
    r = http.get(
        "/v1/sources/view",
        params={
            "source_id": source["source_id"],
            "collection": COLLECTION,
            "chunk": source["chunk_id"],
        },
        headers=bearer(key),
    )
    check(r.status_code == 200 and "nine minutes" in r.text, f"open source: {r.status_code}")
    log("journey: opened the cited source (HTML, the passage marked)")

    mcp = asyncio.run(mcp_calls(stack.url, key))
    check(mcp["search"]["passages"][0]["source_id"] == "noodles.md", f"MCP search: {mcp['search']}")
    check(bool(mcp["ask"]["answer"]) and bool(mcp["ask"]["citations"]), f"MCP ask: {mcp['ask']}")
    log(f"journey: MCP search and ask answered (mode {mcp['ask']['mode']})")
    return {"key": key, "jobs": [job["id"], sync_job["id"]], "conversation": conversation}


# --- faults ----------------------------------------------------------------------------


def observe(http: httpx.Client, key: str, conversation: str = "") -> dict[str, Any]:
    """What must survive: the key, both collections' sources, the completed jobs, the
    journey's stored conversation."""
    r = http.post(
        "/v1/search", json={"query": "noodles", "collection": COLLECTION}, headers=bearer(key)
    )
    sources: list[str] | None = []
    for name in (COLLECTION, SYNCED_COLLECTION):
        token = ""
        while sources is not None:  # every page
            listed = http.get(
                f"/v1/admin/collections/{name}/sources",
                params={"page_token": token, "limit": 100},
                headers=admin_headers(),
            )
            if listed.status_code != 200:
                sources = None
                break
            page = listed.json()
            sources += [f"{name}/{s['source_id']}" for s in page["sources"]]
            token = page.get("next_page_token", "")
            if not token:
                break
    jobs = http.get("/v1/admin/jobs", params={"limit": 100}, headers=admin_headers())
    stored = http.get(f"/v1/conversations/{conversation}", headers=bearer(key))
    return {
        "conversation_kept": stored.status_code == 200 and bool(stored.json().get("answers")),
        "key_valid": r.status_code == 200,
        "sources": sorted(sources) if sources is not None else None,
        "jobs": {j["id"]: j["state"] for j in jobs.json()["jobs"]}
        if jobs.status_code == 200
        else None,
    }


@contextmanager
def chats_running(url: str, key: str) -> Iterator[list[str]]:
    """Chats in a loop on another thread while the body runs: each outcome recorded as
    'ok', 'typed:<code>' (the gateway's error body or an SSE error event) or 'untyped'."""
    outcomes: list[str] = []
    stop = threading.Event()

    def loop() -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            while not stop.is_set():
                try:
                    events = chat(http, key, "How do I descale a kettle?")
                    if "http_error" in events:
                        body = events["body"]
                        outcomes.append(
                            f"typed:{body['error']['code']}" if typed_error(body) else "untyped"
                        )
                    elif "error" in events:
                        outcomes.append(f"typed:{events['error'][0].get('code', '?')}")
                    elif "done" in events:
                        outcomes.append("ok")
                    else:
                        outcomes.append("untyped")
                except (httpx.HTTPError, ValueError):
                    outcomes.append("connection")  # the gateway container itself was killed
                # a user's pace: the gateway's per-key chat limit answers rate_limited to a
                # tight loop (typed too, but it would hide the outcomes that matter)
                stop.wait(CHAT_PAUSE_S)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield outcomes
    finally:
        stop.set()
        thread.join(timeout=90)


def kill_each(
    stack: Stack, http: httpx.Client, key: str, baseline: dict[str, Any]
) -> dict[str, int]:
    counts = {
        "restarts": 0,
        "keys_valid": 0,
        "jobs_terminal": 0,
        "collections_intact": 0,
        "conversations_kept": 0,
    }
    for service in KILLED:
        many = {
            f"fault-{service}-{i}.md": f"# {service} {i}\n\n"
            + ("Filler text about kettles and noodles. " * 200)
            for i in range(FAULT_DOCS)
        }
        # the chats around each kill use a key of their own: one key's 15 chats a
        # minute (the gateway's default) ran out across faults on a fast machine
        with chats_running(stack.url, read_key(http, f"chats-{service}")) as outcomes:
            job_id = ingest(http, many)
            time.sleep(1.5)  # the job is under way
            pid = stack.sigkill(service)
            how = stack.wait_restarted(service, pid)
            stack.wait_http()
            time.sleep(3)  # chats after the recovery
        job = wait_job(http, job_id)
        counts["restarts"] += 1
        counts["jobs_terminal"] += job["state"] in ("succeeded", "failed", "cancelled")
        seen = observe(http, key, baseline["conversation"])
        counts["keys_valid"] += seen["key_valid"]
        counts["conversations_kept"] += seen["conversation_kept"]
        intact = seen["sources"] is not None and set(baseline["sources"]) <= set(seen["sources"])
        counts["collections_intact"] += intact
        completed = all(
            seen["jobs"] and seen["jobs"].get(j) == "succeeded" for j in baseline["done_jobs"]
        )
        check(
            completed,
            f"after killing {service}: completed jobs {baseline['done_jobs']} read {seen['jobs']}",
        )
        untyped = [o for o in outcomes if o == "untyped"]
        tally = {o: outcomes.count(o) for o in sorted(set(outcomes))}
        log(
            f"fault: SIGKILL {service} (back by {how}); ingest job {job['state']}"
            + (f" ({job.get('error', '')[:100]})" if job["state"] != "succeeded" else "")
            + "; "
            f"chats {tally}; key valid {seen['key_valid']}; collection intact {intact}; "
            f"conversation kept {seen['conversation_kept']}"
        )
        check(not untyped, f"after killing {service}: an untyped chat outcome: {tally}")
        check(
            seen["key_valid"] and intact and seen["conversation_kept"],
            f"after killing {service}: {seen}",
        )
        check(
            outcomes.count("ok") > 0 or service == "gateway",
            f"no chat succeeded around the {service} kill: {tally}",
        )
        if job["state"] == "succeeded":
            baseline["done_jobs"].append(job_id)
    return counts


def dependency_gone(stack: Stack, http: httpx.Client, key: str) -> None:
    """A dependency stopped (not killed: stays down): typed errors, then recovery by itself."""

    def call(service: str) -> tuple[bool, str]:
        """(answered, the typed error code or '')."""
        if service == "orchestrator":
            events = chat(http, key, "How do I descale a kettle?")
            if "http_error" in events:
                body = events["body"]
                return False, body["error"]["code"] if typed_error(body) else ""
            if "error" in events:
                return False, str(events["error"][0].get("code", ""))
            return "done" in events, ""
        r = http.post(
            "/v1/search", json={"query": "kettle", "collection": COLLECTION}, headers=bearer(key)
        )
        if r.status_code == 200:
            return True, ""
        return False, r.json()["error"]["code"] if typed_error(r.json()) else ""

    for service in ("orchestrator", "retriever"):
        stack.podman("stop", "-t", "5", stack.container(service))
        answered, code = call(service)
        check(not answered and bool(code), f"{service} gone: answered={answered} code={code!r}")
        stack.podman("start", stack.container(service))
        stack.wait_healthy((service,))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not answered:
            answered, _ = call(service)
            if not answered:
                time.sleep(1)
        check(answered, f"the gateway did not recover from {service}")
        log(
            f"fault: {service} stopped -> the gateway answered the typed error {code!r}; "
            "started again -> the gateway recovered by itself"
        )


def down_up(stack: Stack, http: httpx.Client, key: str, baseline: dict[str, Any]) -> dict[str, Any]:
    stack.down(volumes=False)
    log("fault: podman-compose down (volumes kept)")
    stack.up()
    seen = observe(http, key, baseline["conversation"])
    kept_jobs = sum(
        1 for j in baseline["done_jobs"] if seen["jobs"] and seen["jobs"].get(j) == "succeeded"
    )
    intact = seen["sources"] is not None and set(baseline["sources"]) <= set(seen["sources"])
    log(
        f"fault: down + up: key valid {seen['key_valid']}; completed jobs kept {kept_jobs} "
        f"of {len(baseline['done_jobs'])}; collection intact {intact} "
        f"({len(seen['sources'] or [])} sources); conversation kept {seen['conversation_kept']}"
    )
    check(
        seen["key_valid"]
        and intact
        and seen["conversation_kept"]
        and kept_jobs == len(baseline["done_jobs"]),
        f"down + up lost state: {seen}",
    )
    return {"kept_jobs": kept_jobs, "sources": len(seen["sources"] or [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--project", default="gwdeploytest")
    parser.add_argument("--http-port", type=int, default=18080)
    parser.add_argument("--grpc-port", type=int, default=15053)
    parser.add_argument("--keep", action="store_true", help="leave the stack up at the end")
    args = parser.parse_args()
    stack = Stack(args.work, args.project, args.http_port, args.grpc_port)
    stack.down(volumes=True)  # a previous run's leftovers
    stack.write_inputs()
    started = time.monotonic()
    try:
        stack.up()
        with httpx.Client(base_url=stack.url, timeout=120) as http:
            state = journey(stack, http)
            key = state["key"]
            first = observe(http, key, state["conversation"])
            check(first["conversation_kept"], f"the journey's conversation: {first}")
            baseline = {
                "sources": first["sources"],
                "done_jobs": list(state["jobs"]),
                "conversation": state["conversation"],
            }
            counts = kill_each(stack, http, key, baseline)
            dependency_gone(stack, http, key)
            kept = down_up(stack, http, key, baseline)
        n = counts["restarts"]
        print(
            f"deploy-test: PASSED in {time.monotonic() - started:.0f}s — containers killed and "
            f"restarted {n}; keys valid after restart {counts['keys_valid']} of {n} (+ down/up); "
            f"jobs terminal {counts['jobs_terminal']} of {n}; collections intact "
            f"{counts['collections_intact']} of {n} (+ down/up, {kept['sources']} sources); "
            f"completed jobs kept over down/up {kept['kept_jobs']} of "
            f"{len(baseline['done_jobs'])}; the journey's conversation kept after restart "
            f"{counts['conversations_kept']} of {n} (+ down/up)",
            flush=True,
        )
        return 0
    except Failed as failure:
        print(f"deploy-test: FAILED: {failure}", flush=True)
        for service in ("migrate", "migrate-retriever", *SERVING):
            print(f"--- logs of {service} (last 30 lines)")
            done = subprocess.run(
                ["podman", "logs", "--tail", "30", stack.container(service)],
                capture_output=True,
                text=True,
            )
            print(done.stdout + done.stderr)
        return 1
    finally:
        if not args.keep:
            stack.down(volumes=True)


if __name__ == "__main__":
    sys.exit(main())
