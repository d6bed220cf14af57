"""The orchestrator's citations event as the gateway's SSE ``citations`` JSON: the
verifier's method, the contradiction score, both spans (absent: null) and the
withheld sentences, which the OpenAI-compatible route reports too."""

from __future__ import annotations

import json
from typing import Any

from groundwire.orchestrator.v1 import orchestrator_pb2 as pb
from groundwire_gateway import models
from groundwire_gateway.upstream import _event


def test_spans_methods_and_withheld_sentences_reach_the_sse_json() -> None:
    event = pb.AskEvent(
        citations=pb.CitationsEvent(
            citations=[
                pb.Citation(
                    number=1,
                    sentence="Keys are limited [1].",
                    status=pb.VERIFICATION_STATUS_SUPPORTED,
                    support=0.9,
                    method="llm",
                    answer_span=pb.Span(start=0, end=21),
                    source_span=pb.Span(start=14, end=52),
                    reason="the judge: supported",
                ),
                pb.Citation(number=2, sentence="X [2].", status=pb.VERIFICATION_STATUS_UNCHECKED),
            ],
            withheld=[
                pb.Withheld(
                    sentence="Each key may send twenty [1].",
                    numbers=[1],
                    status=pb.VERIFICATION_STATUS_CONTRADICTED,
                    reason="source [1] contradicts it",
                )
            ],
        )
    )
    got = _event(event)
    assert isinstance(got, models.CitationsEvent)
    data = got.model_dump(mode="json")
    first, second = data["citations"]
    assert (first["method"], first["answer_span"], first["source_span"]) == (
        "llm", [0, 21], [14, 52])
    assert first["reason"] == "the judge: supported"
    assert (second["method"], second["answer_span"], second["source_span"]) == (
        "none", None, None)
    assert data["withheld"] == [
        {
            "sentence": "Each key may send twenty [1].",
            "numbers": [1],
            "status": "contradicted",
            "reason": "source [1] contradicts it",
        }
    ]


async def test_completions_report_the_withheld_sentences(
    make_client: Any, upstream: Any
) -> None:
    withheld = models.WithheldSentence(
        sentence="Clients get 99 chats [2].", numbers=[2], status="contradicted",
        reason="source [2] contradicts it",
    )
    upstream.script = [
        e.model_copy(update={"withheld": [withheld]})
        if isinstance(e, models.CitationsEvent) else e
        for e in upstream.script
    ]
    client = make_client()
    body = {"model": "groundwire", "messages": [{"role": "user", "content": "how?"}]}
    plain = (await client.post("/v1/chat/completions", json=body)).json()
    assert plain["groundwire"]["withheld"] == [withheld.model_dump(mode="json")]
    streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
    last = [ln for ln in streamed.text.splitlines() if '"groundwire"' in ln][-1]
    final = json.loads(last.removeprefix("data:").strip())
    assert final["groundwire"]["withheld"][0]["sentence"] == "Clients get 99 chats [2]."
