"""Load report: the whole stack under a concurrency sweep, per-stage p50/p95 as JSON and PNG.

What it does, in one run on one machine:

1. builds what it needs: the MiniLM model (``--model-dir``, built when missing) and,
   unless ``--reranker none``, a tiny random cross-encoder (no real cross-encoder
   weights exist offline: it exercises the reranker's mechanics, not its real cost);
2. starts a fake LLM as its own process (``tests/fakes/llm_server.py``'s server, with
   settable time to first token and per-token delay; it answers the analysis and
   listwise prompts with valid JSON and the answer prompt with cited sentences taken
   from the excerpts), so the load is on our stack, not on a paid API;
3. starts the local cluster as processes (``LocalCluster``) with the gateway's limits
   off and the orchestrator pointed at the fake LLM, and ingests ``samples/corpus``;
4. for each step of ``--users`` runs locust headless as a subprocess against the gateway
   (``benchmarks/locustfile.py``, ``--duration-s`` per step), reads the summary its
   locustfile writes (locust's stats when it quit, and counters), and checks that no
   service died;
5. optionally (``--throughput``) measures the per-replica throughput of the embedder
   (texts/s at batch 32 through gRPC) and of the reranker (pairs/s) of that cluster;
6. writes ``benchmarks/results/load-<date>.json`` (per step: per-stage p50/p95 from the
   responses' stage reports, end-to-end p50/p95 per request type, requests/s, error
   rate, 5xx count; the machine) and ``load-<date>.png`` beside it, and prints a table.

    python benchmarks/load_report.py                       # 1, 8, 32, 64 users, 60 s each
    python benchmarks/load_report.py --users 32 --duration-s 60 --throughput
    python benchmarks/load_report.py --users 4 --duration-s 10 --out /tmp/load  # a smoke run
    python benchmarks/load_report.py --throughput-only     # only step 5, on the model services

Exit status: 0 when every step ran with no 5xx, no failed request and none cut off by
``--stop-timeout``; 1 otherwise (the report is written either way); 2 when the cluster
could not be set up.

``python benchmarks/load_report.py fake-llm --port 0 --ready-file F`` runs only the
fake LLM (what step 2 starts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCUSTFILE = ROOT / "benchmarks" / "locustfile.py"
RESULTS = ROOT / "benchmarks" / "results"
CORPUS = ROOT / "samples" / "corpus"
DEFAULT_MODEL_DIR = ROOT / "var" / "models" / "minilm"
COLLECTION = "docs"
FAST_MODEL = "fake-fast"
STRONG_MODEL = "fake-strong"

# The gateway's abuse and cost controls are off: the load comes from one address and
# would be refused after 60 searches a minute. Everything else keeps its defaults.
GATEWAY_LOAD_ENV = {
    "GROUNDWIRE_GATEWAY_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_SEARCH_RATE_LIMIT_PER_MIN": "0",
    "GROUNDWIRE_GATEWAY_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_ANONYMOUS_DAILY_QUOTA": "0",
    "GROUNDWIRE_GATEWAY_TOKEN_BUDGET_PER_DAY": "0",
    "GROUNDWIRE_GATEWAY_MAX_INFLIGHT_CHATS": "0",
}
HTTP_TYPES = ("POST", "GET")  # locust rows of real requests; "stage"/"client" are ours


# -- the fake LLM ------------------------------------------------------------------------

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)
_PASSAGE = re.compile(r'<passage n="(\d+)">', re.DOTALL)
_EXCERPT = re.compile(r'<excerpt n="(\d+)"[^>]*>\n[^\n]*\n(.*?)\n</excerpt>', re.DOTALL)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _flat_text(content: Any) -> str:
    """The text of an Anthropic ``system`` or message ``content`` (a string or blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


LEAD_INS = (
    "According to the documentation,",
    "The excerpts say that",
    "In short,",
    "As described there,",
)


def fake_reply_text(body: dict[str, Any], answer_words: int, *, quote: bool = False) -> str:
    """What the fake model says to one Messages API request of the orchestrator.

    Analysis prompt: valid analysis JSON built from the query. Listwise prompt: the
    passages in their given order. Anything else (the answer prompt): up to
    ``answer_words`` words of sentences from the excerpts, each citing its excerpt,
    behind a lead-in as a model's paraphrase would be (so the citation check embeds the
    sentence and the chunk, as it does for real answers), or verbatim with ``quote``
    (the check accepts a verbatim quote without the embedder: a cheaper load).
    """
    system = _flat_text(body.get("system", ""))
    user = "\n".join(_flat_text(m.get("content", "")) for m in body.get("messages", []))
    if "You analyse search queries" in system:
        match = _QUERY.search(user)
        query = " ".join((match.group(1) if match else user[-300:]).split())
        return json.dumps(
            {
                "rewritten_query": query,
                "hyde_document": f"The documentation explains {query}. It describes the "
                "settings involved and what happens when a part of the system fails.",
                "intent": query[:100],
                "filters": [],
                "negatives": [],
            }
        )
    if "You rank search results" in system:
        numbers = [int(n) for n in _PASSAGE.findall(user)] or [1]
        return json.dumps(
            {"ranking": numbers, "reasons": {str(n): "it answers the query" for n in numbers[:3]}}
        )
    sentences: list[str] = []
    words = 0
    excerpts = _EXCERPT.findall(user)
    for number, text in excerpts:
        for sentence in _SENTENCE.split(" ".join(text.split()))[:2]:
            cut = sentence.split()[:30]
            if len(cut) < 4:
                continue
            claim = " ".join(cut).rstrip(".!?")
            if not quote:
                lead = LEAD_INS[len(sentences) % len(LEAD_INS)]
                claim = f"{lead} {claim[0].lower()}{claim[1:]}"
            sentences.append(f"{claim} [{number}].")
            words += len(cut)
            if words >= answer_words:
                break
        if words >= answer_words:
            break
    if not sentences:
        return "I can't answer that from the available documents: they say nothing about it."
    return " ".join(sentences)


def serve_fake_llm(argv: Sequence[str]) -> int:
    """Runs the fake LLM process until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="load_report.py fake-llm")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--ttft-s", type=float, default=0.3)
    parser.add_argument("--token-delay-s", type=float, default=0.02)
    parser.add_argument("--answer-words", type=int, default=80)
    parser.add_argument("--quote", action="store_true", help="quote the excerpts verbatim")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply

    def reply(request: RecordedRequest) -> Reply:
        return Reply(text=fake_reply_text(dict(request.body), args.answer_words, quote=args.quote))

    async def main() -> None:
        server = FakeLLMServer(
            default=reply,
            ttft_s=args.ttft_s,
            token_delay_s=args.token_delay_s,
            port=args.port,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            # the recorded requests would grow without bound under load: trim them
            async def trim() -> None:
                while True:
                    await asyncio.sleep(5)
                    del server.requests[:-100]
                    del server.disconnects[:-100]

            trimmer = asyncio.create_task(trim())
            tmp = args.ready_file.with_suffix(".tmp")
            tmp.write_text(str(server.port))
            tmp.replace(args.ready_file)
            await stop.wait()
            trimmer.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    return 0


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
    run_dir: Path, ttft_s: float, token_delay_s: float, answer_words: int, quote: bool
) -> FakeLLM:
    ready = run_dir / "fake-llm.ready"
    log_path = run_dir / "logs" / "fake-llm.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "fake-llm",
                "--ready-file",
                str(ready),
                "--ttft-s",
                str(ttft_s),
                "--token-delay-s",
                str(token_delay_s),
                "--answer-words",
                str(answer_words),
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


# -- models ------------------------------------------------------------------------------


def ensure_minilm(model_dir: Path) -> Path:
    """The MiniLM ONNX folder, built (offline, ~10 s) when it is missing."""
    if not (model_dir / "groundwire-model.json").exists():
        from groundwire_embedder.export import build_profile

        print(f"building MiniLM into {model_dir}", flush=True)
        build_profile("minilm", model_dir, log=lambda _line: None)
    return model_dir


def corpus_sentences(limit: int = 400) -> list[str]:
    out: list[str] = []
    for path in sorted(CORPUS.glob("*.md")):
        body = path.read_text(encoding="utf-8")
        if body.startswith("---"):  # front matter
            body = body.split("\n---", 2)[-1]
        text = " ".join(
            ln
            for ln in body.splitlines()
            if ln.strip() and not ln.startswith(("#", "```", "|", "---"))
        )
        out.extend(s for s in _SENTENCE.split(text) if len(s.split()) >= 4)
    return out[:limit]


def sample_questions() -> list[str]:
    """The demo's questions (``samples/questions.txt``) and the corpus' headings as
    questions: short texts, shaped like queries."""
    lines = (ROOT / "samples" / "questions.txt").read_text(encoding="utf-8").splitlines()
    out = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    for path in sorted(CORPUS.glob("*.md")):
        out.extend(
            f"what does the documentation say about {ln.lstrip('#').strip().lower()}"
            for ln in path.read_text(encoding="utf-8").splitlines()
            if ln.startswith("## ")
        )
    return out


def parse_sse(raw: str) -> list[tuple[str, Any]]:
    """The (event name, JSON data) pairs of a server-sent event stream. (The locustfile
    has its twin: importing it here would let gevent patch this process.)"""
    out: list[tuple[str, Any]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln and not ln.startswith(":")]
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), "message")
        data = [ln[5:].strip() for ln in lines if ln.startswith("data:")]
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def build_tiny_reranker(run_dir: Path) -> Path:
    """A tiny random BERT cross-encoder as an ONNX reranker folder (mechanics only)."""
    from groundwire_reranker.export import build_profile
    from groundwire_reranker.export.tiny import tiny_checkpoint

    checkpoint = tiny_checkpoint("bert", run_dir / "tiny-reranker-checkpoint", corpus_sentences())
    out = run_dir / "tiny-reranker"
    build_profile("cross-encoder", out, source=checkpoint, log=lambda _line: None)
    return out


# -- the machine -------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            cpu.setdefault(key.strip(), value.strip())
    cpu_model = cpu.get("model name", "")
    flags = cpu.get("flags", "").split()
    mem_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_model": cpu_model or platform.processor() or "unknown",
        "cpu_family_model": f"{cpu.get('cpu family', '?')}/{cpu.get('model', '?')}",
        "cpu_mhz": cpu.get("cpu MHz", ""),
        "virtualized": "hypervisor" in flags,
        "avx512": "avx512f" in flags,
        "cores": usable,
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(),
        "python": platform.python_version(),
    }


# -- locust ------------------------------------------------------------------------------


def summarize_step(users: int, duration_s: float, summary: dict[str, Any]) -> dict[str, Any]:
    """One step of the report from the locustfile's summary (locust's stats entries,
    taken when it quit, and its counters)."""
    entries = summary["entries"]
    http = [e for e in entries if e["type"] in HTTP_TYPES]
    requests = sum(e["count"] for e in http)
    failed = sum(e["failures"] for e in http)
    fallbacks = summary.get("stage_fallbacks", {})

    def figures(e: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in e.items() if k not in ("type", "name")}

    return {
        "users": users,
        "duration_s": duration_s,
        "requests": requests,
        "failures": failed,
        "requests_per_s": round(sum(e["requests_per_s"] for e in http), 3),
        "error_rate": round(failed / requests, 4) if requests else None,
        "http_5xx": sum(int(v) for v in summary.get("http_5xx", {}).values()),
        # requests still running when --stop-timeout ran out: killed, in no figure
        "cut_at_stop": sum(
            max(0, int(n) - sum(e["count"] for e in http if e["name"] == route))
            for route, n in summary.get("started", {}).items()
        ),
        "status_codes": summary.get("status", {}),
        "error_events": summary.get("error_events", {}),
        "end_to_end": {e["name"]: figures(e) for e in http},
        "client": {e["name"]: figures(e) for e in entries if e["type"] == "client"},
        "stages": {
            e["name"]: {**figures(e), "fallbacks": int(fallbacks.get(e["name"], 0))}
            for e in entries
            if e["type"] == "stage"
        },
        "fallback_reasons": summary.get("fallback_reasons", {}),
        "answer_modes": summary.get("answer_modes", {}),
        "failure_kinds": {
            f"{e['name']}: {e['error']}"[:200]: e["occurrences"] for e in summary.get("errors", [])
        },
    }


def run_locust(
    host: str,
    users: int,
    duration_s: float,
    work_dir: Path,
    env: dict[str, str],
    stop_timeout_s: float,
) -> dict[str, Any]:
    """One headless locust run (its own process); the step's figures."""
    prefix = work_dir / f"u{users}"
    summary_path = work_dir / f"u{users}-summary.json"
    step_env = {**os.environ, **env, "GW_LOAD_SUMMARY_FILE": str(summary_path)}
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{duration_s:g}s",
        "--stop-timeout",
        f"{stop_timeout_s:g}",
        "--host",
        host,
        "--csv",
        str(prefix),
        "--only-summary",
        "--loglevel",
        "WARNING",
    ]
    load_before = os.getloadavg()[0]
    # bounded: the run's length, the stop timeout and a margin for start-up
    limit_s = duration_s + stop_timeout_s + 60
    done = subprocess.run(
        command, env=step_env, capture_output=True, text=True, timeout=limit_s, check=False
    )
    if not summary_path.exists():
        raise RuntimeError(
            f"locust ({users} users) wrote no results (exit {done.returncode}):\n"
            f"{done.stderr[-3000:]}"
        )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    step = summarize_step(users, duration_s, summary)
    step["load_average_1m"] = {
        "before": round(load_before, 2),
        "after": round(os.getloadavg()[0], 2),
    }
    step["locust_exit_code"] = done.returncode
    return step


# -- per-replica throughput of the model services -----------------------------------------


def _passages(words: int, count: int) -> list[str]:
    sentences = corpus_sentences(2000)
    out: list[str] = []
    i = 0
    while len(out) < count:
        chosen: list[str] = []
        while len(chosen) < words:
            chosen.extend(sentences[i % len(sentences)].split())
            i += 1
        out.append(" ".join(chosen[:words]))
    return out


async def _saturate(
    call: Any, requests: list[Any], clients: int, seconds: float
) -> tuple[int, float, int]:
    """Calls ``call`` from ``clients`` concurrent loops for ``seconds``; (calls, elapsed,
    total_tokens)."""
    calls = tokens = 0
    deadline = time.perf_counter() + seconds

    async def loop(offset: int) -> None:
        nonlocal calls, tokens
        n = offset
        while time.perf_counter() < deadline:
            reply = await call(requests[n % len(requests)], timeout=120)
            calls += 1
            tokens += int(reply.total_tokens)
            n += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(clients)))
    return calls, time.perf_counter() - started, tokens


async def measure_throughput(
    embedder_addr: str,
    reranker_addr: str | None,
    seconds: float,
    clients: int,
    *,
    reranker_is_tiny: bool = True,
) -> dict[str, Any]:
    """Texts/s of the embedder at batch 32 (queries and passages) and pairs/s of the
    reranker (a query and 50 passages per call), each replica saturated by ``clients``
    concurrent gRPC callers."""
    from groundwire.embedder.v1 import embedder_pb2, embedder_pb2_grpc
    from groundwire.reranker.v1 import reranker_pb2, reranker_pb2_grpc
    from groundwire_core.grpc.client import create_channel

    questions = sample_questions()
    out: dict[str, Any] = {"clients": clients, "seconds_per_cell": seconds}
    channel = create_channel(embedder_addr)
    try:
        embedder = embedder_pb2_grpc.EmbedderServiceStub(channel)
        info = await embedder.Info(embedder_pb2.InfoRequest(), timeout=10)
        shapes = {
            "query": [
                questions[i % len(questions) :] + questions[: i % len(questions)] for i in range(8)
            ],
            "passage": [_passages(180, 32) for _ in range(4)],
        }
        cells: dict[str, Any] = {}
        for shape, batches in shapes.items():
            requests = [embedder_pb2.EmbedRequest(texts=(b * 2)[:32]) for b in batches]
            await embedder.Embed(requests[0], timeout=120)  # warm
            calls, elapsed, tokens = await _saturate(embedder.Embed, requests, clients, seconds)
            texts = calls * 32
            cells[shape] = {
                "batch_texts": 32,
                "mean_tokens_per_text": round(tokens / texts, 1) if texts else None,
                "texts_per_s": round(texts / elapsed, 1),
                "tokens_per_s": round(tokens / elapsed, 0),
            }
        out["embedder"] = {
            "model_id": info.model_id,
            "profile": info.profile,
            "max_tokens": info.max_tokens,
            "quantized": info.quantized,
            **cells,
        }
    finally:
        await channel.close()
    if reranker_addr is None:
        return out
    channel = create_channel(reranker_addr)
    try:
        reranker = reranker_pb2_grpc.RerankerServiceStub(channel)
        info = await reranker.Info(reranker_pb2.InfoRequest(), timeout=10)
        passages = _passages(120, 50 * 4)
        requests = [
            reranker_pb2.RerankRequest(
                query=questions[i % len(questions)],
                passages=passages[i * 50 : (i + 1) * 50],
                top_n=20,
            )
            for i in range(4)
        ]
        await reranker.Rerank(requests[0], timeout=120)
        calls, elapsed, tokens = await _saturate(reranker.Rerank, requests, clients, seconds)
        pairs = calls * 50
        out["reranker"] = {
            "model_id": info.model_id,
            "profile": info.profile,
            "max_tokens": info.max_tokens,
            "mechanics_only": reranker_is_tiny,
            "passages_per_call": 50,
            "mean_tokens_per_pair": round(tokens / pairs, 1) if pairs else None,
            "pairs_per_s": round(pairs / elapsed, 1),
            "tokens_per_s": round(tokens / elapsed, 0),
        }
    finally:
        await channel.close()
    return out


# -- the report ----------------------------------------------------------------------------


def write_chart(report: dict[str, Any], path: Path) -> None:
    """p50/p95 per stage and end to end, against users."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = report["steps"]
    users = [s["users"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))

    def series(key: str, name: str) -> tuple[list[Any], list[Any]]:
        rows = [s[key].get(name) for s in steps]
        return (
            [r["p50_ms"] if r else None for r in rows],
            [r["p95_ms"] if r else None for r in rows],
        )

    stage_names = [n for n in report["stage_order"] if any(n in s["stages"] for s in steps)]
    panels = (
        (
            axes[0],
            "per stage (the responses' stage reports)",
            [("stages", n, n) for n in stage_names],
        ),
        (
            axes[1],
            "end to end (client)",
            [("end_to_end", n, n) for n in sorted({n for s in steps for n in s["end_to_end"]})]
            + [("client", n, n) for n in sorted({n for s in steps for n in s["client"]})],
        ),
    )
    for ax, title, lines in panels:
        for i, (key, name, label) in enumerate(lines):
            color = f"C{i % 10}"
            p50, p95 = series(key, name)
            ax.plot(users, p50, "o-", color=color, label=f"{label} p50")
            ax.plot(users, p95, "s--", color=color, alpha=0.6, label=f"{label} p95")
        ax.set_title(title)
        ax.set_xlabel("concurrent users")
        ax.set_ylabel("ms (log above 1 ms)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(users, [str(u) for u in users])
        ax.set_yscale("symlog", linthresh=1.0)  # some stages take well under 1 ms
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    m = report["machine"]
    fig.suptitle(
        f"Groundwire load ({report['created'][:10]}): {m['cores']} cores, {m['cpu_model']}, "
        f"fake LLM TTFT {report['config']['fake_llm']['ttft_s']:g}s",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def format_table(report: dict[str, Any]) -> str:
    steps = report["steps"]
    lines = [
        "users  req/s   requests  failed  5xx  cut  err%   search p50/p95 ms   chat p50/p95 ms",
    ]
    for s in steps:
        e2e = s["end_to_end"]

        def pair(name: str, e2e: dict[str, Any] = e2e) -> str:
            row = e2e.get(name)
            return f"{row['p50_ms']:>7.0f} / {row['p95_ms']:<7.0f}" if row else f"{'-':>17}"

        rate = f"{100 * s['error_rate']:.2f}" if s["error_rate"] is not None else "-"
        lines.append(
            f"{s['users']:>5}  {s['requests_per_s']:>5.1f}  {s['requests']:>8}  "
            f"{s['failures']:>6}  {s['http_5xx']:>3}  {s['cut_at_stop']:>3}  {rate:>5}   "
            f"{pair('search')}   "
            f"{pair('chat')}"
        )
    stage_names = [n for n in report["stage_order"] if any(n in s["stages"] for s in steps)]
    lines.append("")
    lines.append(
        "per stage p50 / p95 ms (fallbacks)   "
        + "".join(f"{str(s['users']) + ' users':>24}" for s in steps)
    )
    for name in stage_names:
        cells = []
        for s in steps:
            row = s["stages"].get(name)
            cells.append(
                f"{row['p50_ms']:>8.0f} / {row['p95_ms']:<6.0f}({row['fallbacks']:>4})"
                if row
                else f"{'-':>24}"
            )
        lines.append(f"{name:<36}" + "".join(f"{c:>24}" for c in cells))
    for name in sorted({n for s in steps for n in s["client"]}):
        cells = []
        for s in steps:
            row = s["client"].get(name)
            cells.append(f"{row['p50_ms']:>8.0f} / {row['p95_ms']:<12.0f}" if row else "-")
        lines.append(f"{'client ' + name:<36}" + "".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def format_throughput(t: dict[str, Any]) -> str:
    lines = []
    emb = t.get("embedder")
    if emb:
        for shape in ("query", "passage"):
            c = emb[shape]
            lines.append(
                f"embedder {emb['model_id']} {shape}: {c['texts_per_s']:.0f} texts/s at batch 32 "
                f"(~{c['mean_tokens_per_text']} tokens/text, {c['tokens_per_s']:.0f} tokens/s)"
            )
    rr = t.get("reranker")
    if rr:
        lines.append(
            f"reranker {rr['model_id']}: {rr['pairs_per_s']:.0f} pairs/s, 50 per call "
            f"(~{rr['mean_tokens_per_pair']} tokens/pair)"
            + (" -- tiny random model: mechanics only" if rr["mechanics_only"] else "")
        )
    return "\n".join(lines)


STAGE_ORDER = ("analysis", "retrieval", "rerank", "screening", "listwise", "answer", "citations")


def parse_users(raw: str) -> list[int]:
    try:
        users = [int(u) for u in raw.split(",") if u.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--users wants numbers like 1,8,32: {raw!r}") from None
    if not users or any(u < 1 or u > 1000 for u in users):
        raise argparse.ArgumentTypeError("--users: 1..1000 each")
    return users


@contextlib.contextmanager
def run_directory(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    path = Path(tempfile.mkdtemp(prefix="gw-load-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sweep(args: argparse.Namespace) -> int:
    import httpx

    from groundwire_cli.cluster import ClusterError, LocalCluster
    from groundwire_cli.ingest import find_documents, ingest_files
    from groundwire_core.errors import GroundwireError

    created = dt.datetime.now(dt.UTC)
    name = args.name or f"load-{created:%Y-%m-%d}"
    args.out.mkdir(parents=True, exist_ok=True)
    machine_at_start = machine()
    with run_directory(args.run_dir) as run_dir:
        model_dir = ensure_minilm(args.model_dir)
        env = {
            **GATEWAY_LOAD_ENV,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_API_KEY": "fake",
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_FAST_MODEL": FAST_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_STRONG_MODEL": STRONG_MODEL,
            "GROUNDWIRE_ORCHESTRATOR_LLM_ORDER": "anthropic",
        }
        reranker_dir: Path | None = None
        if args.reranker == "tiny":
            print("building the tiny random cross-encoder (mechanics only)", flush=True)
            reranker_dir = build_tiny_reranker(run_dir)
            env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(reranker_dir)
            # a random model's scores mean nothing: keep what it scores
            env["GROUNDWIRE_ORCHESTRATOR_RERANK_THRESHOLD"] = "0"
        fake = start_fake_llm(
            run_dir,
            args.ttft_s,
            args.token_delay_s,
            args.answer_words,
            args.answer_style == "quote",
        )
        env["GROUNDWIRE_ORCHESTRATOR_ANTHROPIC_BASE_URL"] = fake.url
        env.update(args.settings)
        cluster = LocalCluster.with_free_ports(run_dir, model_dir, run_dir / "qdrant", env)
        steps: list[dict[str, Any]] = []
        throughput: dict[str, Any] | None = None
        files: list[Path] = []
        chunks = 0
        ingest_s = 0.0
        warm: dict[str, Any] = {}
        try:
            with cluster:
                print(f"starting the cluster; logs in {run_dir / 'logs'}", flush=True)
                cluster.start()
                cluster.wait_ready(timeout_s=180)
                files = find_documents([CORPUS])[: args.max_documents]
                t0 = time.perf_counter()
                totals = asyncio.run(
                    ingest_files(cluster.addr("retriever"), COLLECTION, files, root=CORPUS)
                )
                ingest_s = time.perf_counter() - t0
                chunks = totals.chunks_written
                print(
                    f"ingested {totals.ingested} documents, {totals.chunks_written} chunks "
                    f"in {ingest_s:.1f} s",
                    flush=True,
                )
                warm = warm_up(httpx, cluster.gateway_url)
                print(
                    f"warm-up: search {warm['search_ms']:.0f} ms, chat {warm['chat_ms']:.0f} ms "
                    f"({warm['chat_mode']})",
                    flush=True,
                )
                locust_env = {
                    "GW_LOAD_SEARCH_WEIGHT": str(args.search_weight),
                    "GW_LOAD_CHAT_WEIGHT": str(args.chat_weight),
                    "GW_LOAD_WAIT_S": str(args.wait_s),
                    "GW_LOAD_LISTWISE_SHARE": str(args.listwise_share),
                    "GW_LOAD_COLLECTION": COLLECTION,
                }
                for i, users in enumerate(args.users):
                    if i:
                        time.sleep(args.cooldown_s)
                    print(
                        f"step {i + 1}/{len(args.users)}: {users} users for {args.duration_s:g} s",
                        flush=True,
                    )
                    step = run_locust(
                        cluster.gateway_url,
                        users,
                        args.duration_s,
                        run_dir,
                        locust_env,
                        args.stop_timeout_s,
                    )
                    crashed = cluster.crashed()
                    step["crashed_services"] = [n for n, _ in crashed]
                    steps.append(step)
                    print(
                        f"  {step['requests']} requests, {step['requests_per_s']:.1f}/s, "
                        f"{step['failures']} failed, {step['http_5xx']} 5xx, "
                        f"{step['cut_at_stop']} cut at stop",
                        flush=True,
                    )
                    if crashed:
                        for n, code in crashed:
                            print(
                                f"error: {n} exited with code {code}:\n"
                                f"{cluster.children[n].log_tail()}",
                                file=sys.stderr,
                            )
                        break
                if args.throughput and not cluster.crashed():
                    print("measuring per-replica throughput of the model services", flush=True)
                    throughput = asyncio.run(
                        measure_throughput(
                            cluster.addr("embedder"),
                            cluster.addr("reranker") if reranker_dir else None,
                            args.throughput_s,
                            args.throughput_clients,
                        )
                    )
        except (
            ClusterError,
            GroundwireError,
            RuntimeError,
            OSError,
            subprocess.SubprocessError,
        ) as error:
            print(f"error: {error}", file=sys.stderr)
            if not steps:
                return 2
        finally:
            fake.stop()

    report: dict[str, Any] = {
        "name": name,
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "config": {
            "users": args.users,
            "duration_s": args.duration_s,
            "mix": {"search": args.search_weight, "chat": args.chat_weight},
            "wait_s": args.wait_s,
            "listwise_share": args.listwise_share,
            "fake_llm": {
                "ttft_s": args.ttft_s,
                "token_delay_s": args.token_delay_s,
                "answer_words": args.answer_words,
                "answer_style": args.answer_style,
            },
            "embedder_model": str(model_dir.name),
            "reranker_model": "tiny random BERT cross-encoder (mechanics only)"
            if reranker_dir
            else "none (rerank falls back to the fused order)",
            "environment_overrides": {
                k: v for k, v in env.items() if "API_KEY" not in k and "BASE_URL" not in k
            },
            "corpus": {"documents": len(files), "chunks": chunks, "ingest_s": round(ingest_s, 1)},
            "warm_up": warm,
        },
        "stage_order": list(STAGE_ORDER),
        "steps": steps,
    }
    report["machine"]["locust"] = _locust_version()
    if throughput is not None:
        report["throughput"] = throughput
    json_path = args.out / f"{name}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if not args.no_chart and steps:
        write_chart(report, args.out / f"{name}.png")
    print()
    m = report["machine"]
    print(
        f"{m['cores']} cores ({m['cpu_model']}), {m['memory_gib']} GiB; load average at "
        f"start {m['load_average_at_start'][0]}, at end {m['load_average_at_end'][0]}"
    )
    print(format_table(report))
    if throughput:
        print()
        print(format_throughput(throughput))
    print(f"\nreport: {json_path}" + ("" if args.no_chart else f" and {name}.png"))
    clean = len(steps) == len(args.users) and all(
        s["failures"] == 0
        and s["http_5xx"] == 0
        and s["cut_at_stop"] == 0
        and not s["crashed_services"]
        for s in steps
    )
    return 0 if clean else 1


def throughput_only(args: argparse.Namespace) -> int:
    """Only the model services (embedder, reranker) and their per-replica throughput."""
    from groundwire_cli.cluster import LocalCluster

    created = dt.datetime.now(dt.UTC)
    name = args.name or f"load-{created:%Y-%m-%d}-throughput"
    args.out.mkdir(parents=True, exist_ok=True)
    names = ("embedder", "reranker") if args.reranker == "tiny" else ("embedder",)
    with run_directory(args.run_dir) as run_dir:
        model_dir = ensure_minilm(args.model_dir)
        env: dict[str, str] = {}
        if args.reranker == "tiny":
            print("building the tiny random cross-encoder (mechanics only)", flush=True)
            env["GROUNDWIRE_RERANKER_MODEL_DIR"] = str(build_tiny_reranker(run_dir))
        env.update(args.settings)
        with LocalCluster.with_free_ports(run_dir, model_dir, run_dir / "qdrant", env) as cluster:
            cluster.start(names)
            cluster.wait_ready(timeout_s=180, names=names)
            machine_before = machine()
            throughput = asyncio.run(
                measure_throughput(
                    cluster.addr("embedder"),
                    cluster.addr("reranker") if "reranker" in names else None,
                    args.throughput_s,
                    args.throughput_clients,
                )
            )
    report = {
        "name": name,
        "created": created.isoformat(timespec="seconds"),
        "machine": {
            **machine_before,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "note": args.note,
        "config": {
            "embedder_model": model_dir.name,
            "reranker_model": (
                "tiny random BERT cross-encoder (mechanics only)" if "reranker" in names else "none"
            ),
            "services": list(names),
            "service_settings": "defaults",
        },
        "throughput": throughput,
    }
    path = args.out / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    m = report["machine"]
    print(
        f"{m['cores']} cores ({m['cpu_model']}); load average at start "
        f"{m['load_average_at_start'][0]}, at end {m['load_average_at_end'][0]}"
    )
    print(format_throughput(throughput))
    print(f"\nreport: {path}")
    return 0


def warm_up(httpx: Any, url: str) -> dict[str, Any]:
    """One search and one chat before the sweep: the stack answers, the LLM is the fake."""
    with httpx.Client(base_url=url, timeout=120) as client:
        t0 = time.perf_counter()
        search = client.post("/v1/search", json={"query": "how are citations checked"})
        search_ms = (time.perf_counter() - t0) * 1e3
        if search.status_code != 200:
            raise RuntimeError(f"warm-up search answered {search.status_code}: {search.text}")
        t0 = time.perf_counter()
        chat = client.post(
            "/v1/chat",
            json={
                "messages": [
                    {"role": "user", "content": "how are citations checked against the sources"}
                ]
            },
        )
        chat_ms = (time.perf_counter() - t0) * 1e3
        if chat.status_code != 200:
            raise RuntimeError(f"warm-up chat answered {chat.status_code}: {chat.text}")
    events = parse_sse(chat.text)
    done = [d for n, d in events if n == "done"]
    if not done:
        raise RuntimeError(f"warm-up chat ended without done: {[n for n, _ in events]}")
    stages = {s["name"]: s for n, d in events if n == "stages" for s in d["stages"]}
    if stages.get("analysis", {}).get("fallback"):
        raise RuntimeError(f"the fake LLM did not serve the analysis: {stages['analysis']}")
    return {
        "search_ms": round(search_ms, 1),
        "chat_ms": round(chat_ms, 1),
        "chat_mode": done[0]["mode"],
        "search_results": len(search.json()["results"]),
        "chat_stages": {
            n: {"ms": round(s["ms"], 1), "fallback": s["fallback"], "reason": s.get("reason", "")}
            for n, s in stages.items()
        },
    }


def _locust_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("locust")
    except PackageNotFoundError:
        return "not installed"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["fake-llm"]:
        return serve_fake_llm(argv[1:])
    parser = argparse.ArgumentParser(
        description="Sweep concurrency against a local cluster with a fake LLM; write "
        "per-stage p50/p95 as JSON and PNG."
    )
    parser.add_argument(
        "--users",
        type=parse_users,
        default=[1, 8, 32, 64],
        help="concurrency steps, comma-separated (1,8,32,64)",
    )
    parser.add_argument("--duration-s", type=float, default=60.0, help="seconds per step")
    parser.add_argument("--search-weight", type=int, default=3, help="searches in the mix")
    parser.add_argument("--chat-weight", type=int, default=1, help="chats in the mix")
    parser.add_argument(
        "--wait-s",
        type=float,
        default=0.0,
        help="think time: uniform 0..this between a user's requests",
    )
    parser.add_argument(
        "--listwise-share",
        type=float,
        default=0.0,
        help="share of requests asking for the listwise LLM stage",
    )
    parser.add_argument("--ttft-s", type=float, default=0.3, help="fake LLM time to first token")
    parser.add_argument(
        "--token-delay-s", type=float, default=0.02, help="fake LLM delay per streamed word"
    )
    parser.add_argument(
        "--answer-words", type=int, default=80, help="words of the fake LLM's answers"
    )
    parser.add_argument(
        "--answer-style",
        choices=("paraphrase", "quote"),
        default="paraphrase",
        help="the fake LLM's answers: sentences behind a lead-in (checked "
        "through the embedder, like a model's paraphrase) or verbatim quotes "
        "(accepted without the embedder: a lighter load)",
    )
    parser.add_argument(
        "--reranker",
        choices=("tiny", "none"),
        default="tiny",
        help="serve a tiny random cross-encoder, or none",
    )
    parser.add_argument(
        "--max-documents",
        type=int,
        default=None,
        help="ingest only the first N documents of samples/corpus",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help="the MiniLM ONNX folder (built here when missing)",
    )
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="also measure the model services' per-replica throughput",
    )
    parser.add_argument(
        "--throughput-only",
        action="store_true",
        help="no sweep: start only the model services and measure them",
    )
    parser.add_argument(
        "--throughput-s", type=float, default=15.0, help="seconds per throughput cell"
    )
    parser.add_argument(
        "--throughput-clients",
        type=int,
        default=4,
        help="concurrent gRPC callers saturating one replica",
    )
    parser.add_argument("--cooldown-s", type=float, default=5.0, help="pause between steps")
    parser.add_argument(
        "--stop-timeout-s",
        type=float,
        default=30.0,
        help="how long users may finish their request when a step ends",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the report")
    parser.add_argument("--name", default=None, help="file name stem (load-<date>)")
    parser.add_argument(
        "--note", default="", help="recorded in the report (e.g. the machine was shared)"
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="keep logs and data here (default: a temporary folder)",
    )
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a service setting for this run, e.g. GROUNDWIRE_EMBEDDER_MODEL_LANES=1 "
        "(repeatable; recorded in the report). The cluster gives each service its own "
        "settings, so a setting in this shell's environment does not reach it",
    )
    args = parser.parse_args(argv)
    overrides: dict[str, str] = {}
    for setting in args.settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.startswith("GROUNDWIRE_"):
            parser.error(f"--set {setting!r}: expected GROUNDWIRE_<SERVICE>_<NAME>=VALUE")
        overrides[key] = value
    args.settings = overrides
    if (
        args.search_weight < 0
        or args.chat_weight < 0
        or not (args.search_weight or args.chat_weight)
    ):
        parser.error("the mix needs a positive --search-weight or --chat-weight")
    if args.duration_s <= 0 or args.duration_s > 3600:
        parser.error("--duration-s: more than 0, at most 3600")
    return throughput_only(args) if args.throughput_only else sweep(args)


if __name__ == "__main__":
    sys.exit(main())
