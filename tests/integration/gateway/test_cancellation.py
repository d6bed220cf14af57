"""A client that goes away mid-answer cancels the orchestrator's Ask call (gateway
process, real sockets; the fake orchestrator records when its call was cancelled).
The LLM half (the orchestrator cancelling its LLM request) is the orchestrator's."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

HANG = {"messages": [{"role": "user", "content": "hang on, tell me everything"}]}


@pytest.fixture(scope="module")
def gateway(gateways: Any, fake_upstream: Any) -> Any:
    (gw,) = gateways.start(**fake_upstream.env(), MAX_INFLIGHT_CHATS="1")
    return gw


def _wait_for(predicate: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


@pytest.mark.parametrize(
    ("path", "body", "marker"),
    [
        ("/v1/chat", HANG, "event: delta"),
        (
            "/v1/chat/completions",
            {"model": "groundwire", "stream": True, **HANG},
            '"content":"word1 "',
        ),
    ],
    ids=["chat", "completions"],
)
def test_disconnect_cancels_the_ask_within_a_second(
    gateway: Any, fake_upstream: Any, read_metric: Any, path: str, body: Any, marker: str
) -> None:
    orchestrator = fake_upstream.orchestrator
    before = len(orchestrator.asks)
    cancelled_before = read_metric(gateway.url, "groundwire_gateway_cancelled_chats_total")
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        with client.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            # Held, so that breaking out does not finalize it (httpx would close the
            # connection right there, before the check below).
            lines = response.iter_lines()
            for line in lines:
                if marker in line:
                    break
            record = orchestrator.asks[before]
            assert record.cancelled_at is None, "the answer was still streaming"
            closed_at = time.monotonic()
            response.close()  # the client goes away mid-answer
    assert _wait_for(lambda: record.cancelled_at is not None, 2.0), "Ask was never cancelled"
    assert record.cancelled_at is not None
    assert record.cancelled_at - closed_at < 1.0
    assert not record.finished
    # the gateway counted it and freed the only chat slot
    assert _wait_for(
        lambda: (
            read_metric(gateway.url, "groundwire_gateway_cancelled_chats_total")
            == cancelled_before + 1
        ),
        2.0,
    )
    assert read_metric(gateway.url, "groundwire_gateway_inflight_chats") == 0
    quick = {"messages": [{"role": "user", "content": "quick one"}]}
    reply = httpx.post(f"{gateway.url}/v1/chat", json=quick, timeout=10)
    assert reply.status_code == 200 and "event: done" in reply.text


def test_a_finished_answer_is_not_cancelled(gateway: Any, fake_upstream: Any) -> None:
    orchestrator = fake_upstream.orchestrator
    before = len(orchestrator.asks)
    body = {"messages": [{"role": "user", "content": "a normal question"}]}
    reply = httpx.post(f"{gateway.url}/v1/chat", json=body, timeout=10)
    assert reply.status_code == 200 and "event: done" in reply.text
    record = orchestrator.asks[before]
    assert _wait_for(lambda: record.ended is not None, 2.0)
    assert record.finished and record.cancelled_at is None
