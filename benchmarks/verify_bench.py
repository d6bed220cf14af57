"""Verify before show: time to the first sentence a reader sees, with the gate on and
off (issue #21). Not run by CI.

The answer stage streams a four-sentence cited answer from the fake LLM
(tests/fakes/llm_server.py, through the real Anthropic SDK) with a time to first token
and a per-token delay; the LLM judge (the same fake, its own delays) checks each
sentence. Off: the first sentence is seen when the deltas received contain its last
character. On: when the gate releases its first delta (the first sentence checked).
Each mode runs ``--runs`` times; medians are reported, printed as a table and JSON.

    .venv/bin/python benchmarks/verify_bench.py --out benchmarks/results/verify-fake.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from groundwire_orchestrator.domain import AnswerDelta, Candidate  # noqa: E402
from groundwire_orchestrator.llm.factory import build_llm  # noqa: E402
from groundwire_orchestrator.settings import OrchestratorSettings  # noqa: E402
from groundwire_orchestrator.stages.answer import AnswerInput, GroundedAnswerStage  # noqa: E402
from groundwire_orchestrator.stages.citations import CitationVerifier  # noqa: E402
from groundwire_orchestrator.stages.gate import VerifyBeforeShow  # noqa: E402
from groundwire_orchestrator.text.ledger import SourceLedger  # noqa: E402
from groundwire_orchestrator.verification.chain import VerifierChain  # noqa: E402
from groundwire_orchestrator.verification.judge import LlmJudge  # noqa: E402
from groundwire_orchestrator.verification.similarity import SimilarityVerifier  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply  # noqa: E402

PASSAGE = (
    "Rate limits are enforced per API key. Each key may send sixty requests per minute. "
    "Beyond that the gateway answers 429 with a Retry-After header. Quotas count requests "
    "per day and reset at midnight UTC."
)
ANSWER = (
    "Rate limits are enforced per API key, so every key has a budget of its own [1]. "
    "Each key may send sixty requests per minute before the gateway starts refusing [1]. "
    "Beyond that the gateway answers 429 and says when to retry in a Retry-After header [1]. "
    "Daily quotas are separate and reset at midnight UTC for every key [1]."
)


class Model:
    """The fake LLM: the answer for the answer prompt, verdicts for the judge's."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def __call__(self, request: RecordedRequest) -> Reply:
        system = request.body.get("system", "")
        system = system if isinstance(system, str) else " ".join(b["text"] for b in system)
        a = self.args
        if system.startswith("You check claims"):
            content = request.body["messages"][-1]["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            claims = re.findall(r'<claim number="(\d+)"', text)
            verdicts = [
                {"claim": int(n), "verdict": "supported", "confidence": 0.9,
                 "evidence": "Rate limits are enforced per API key."}
                for n in claims
            ]
            return Reply(json={"verdicts": verdicts}, ttft_s=a.judge_ttft_s,
                         token_delay_s=a.judge_token_delay_s)
        return Reply(text=ANSWER, ttft_s=a.ttft_s, token_delay_s=a.token_delay_s)


async def _once(url: str, *, gate_on: bool) -> dict[str, float]:
    settings = OrchestratorSettings(
        anthropic_api_key=SecretStr("bench"), anthropic_base_url=url, llm_order="anthropic"
    )
    llm = build_llm(settings)
    assert llm is not None
    await llm.warm_up()
    try:
        ledger = SourceLedger()
        ledger.add([Candidate("c1", "limits.md", "Rate limits", (), "", PASSAGE, 1.0)])
        stage = GroundedAnswerStage(
            llm, timeout_s=30, max_tokens=512, context_tokens=2000, history_tokens=0
        )
        chain = VerifierChain(
            [LlmJudge(llm, timeout_s=10), SimilarityVerifier(None, threshold=0.45)]
        )
        gate = VerifyBeforeShow(CitationVerifier(None, threshold=0.45, chain=chain), ledger.get)
        first_end = ANSWER.index("[1].") + len("[1].")
        started = time.perf_counter()
        seen = ""
        first: float | None = None
        async for event in stage.run(AnswerInput("How are requests limited?", (), ledger)):
            if not isinstance(event, AnswerDelta):
                continue
            released = await gate.pass_event(event) if gate_on else [event]
            for piece in released:
                if isinstance(piece, AnswerDelta):
                    seen += piece.text
            if first is None and len(seen) >= first_end:
                first = time.perf_counter() - started
        if gate_on:
            for piece in await gate.finish():
                if isinstance(piece, AnswerDelta):
                    seen += piece.text
        total = time.perf_counter() - started
        assert seen.strip() == ANSWER, seen
        if first is None:
            first = total
        return {"first_sentence_ms": first * 1e3, "total_ms": total * 1e3}
    finally:
        await llm.aclose()


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    async with FakeLLMServer(default=Model(args)) as fake:
        await _once(fake.url, gate_on=False)  # warm-up: SDK imports, connections
        runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        for _ in range(args.runs):
            for mode in ("off", "on"):
                runs[mode].append(await _once(fake.url, gate_on=mode == "on"))
    med = {
        mode: {k: round(statistics.median(r[k] for r in rs), 1) for k in rs[0]}
        for mode, rs in runs.items()
    }
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "setup": {
            "answer_sentences": 4,
            "answer_words": len(ANSWER.split()),
            "ttft_s": args.ttft_s,
            "token_delay_s": args.token_delay_s,
            "judge_ttft_s": args.judge_ttft_s,
            "judge_token_delay_s": args.judge_token_delay_s,
            "runs": args.runs,
            "llm": "fake (tests/fakes/llm_server.py) through the Anthropic SDK",
        },
        "off": med["off"],
        "on": med["on"],
        "first_sentence_ratio": round(
            med["on"]["first_sentence_ms"] / med["off"]["first_sentence_ms"], 2
        ),
        "first_sentence_added_ms": round(
            med["on"]["first_sentence_ms"] - med["off"]["first_sentence_ms"], 1
        ),
        "total_ratio": round(med["on"]["total_ms"] / med["off"]["total_ms"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ttft-s", type=float, default=0.3, help="answer: time to first token")
    parser.add_argument("--token-delay-s", type=float, default=0.03, help="answer: per word")
    parser.add_argument("--judge-ttft-s", type=float, default=0.3, help="judge: first token")
    parser.add_argument("--judge-token-delay-s", type=float, default=0.005, help="judge: per word")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args()
    result = asyncio.run(_bench(args))
    print(f"{'mode':<6}{'first sentence ms':>20}{'whole answer ms':>18}")
    for mode in ("off", "on"):
        print(f"{mode:<6}{result[mode]['first_sentence_ms']:>20}{result[mode]['total_ms']:>18}")
    print(f"first sentence on/off: {result['first_sentence_ratio']}x "
          f"(+{result['first_sentence_added_ms']} ms); whole answer {result['total_ratio']}x")
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
