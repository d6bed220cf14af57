"""The recorded embedder outage: after a failure that says the embedder cannot answer,
every client sharing the outage fails at once (Unavailable naming the embedder and the
first failure) for the pause, then asks the embedder again; a request's own error
(INVALID_ARGUMENT) records nothing."""

from __future__ import annotations

import pytest

from groundwire_core.clients.embedder import EmbedderInfo
from groundwire_core.errors import DeadlineExceeded, InvalidInput, Unavailable
from groundwire_orchestrator.clients.embedder_outage import EmbedderOutage, OutageAwareEmbedder
from tests.unit.orchestrator.doubles import FakeEmbedder


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pair(
    retry_after_s: float = 5.0,
) -> tuple[Clock, FakeEmbedder, OutageAwareEmbedder, OutageAwareEmbedder]:
    clock = Clock()
    inner = FakeEmbedder()
    outage = EmbedderOutage(retry_after_s, clock=clock)
    return clock, inner, OutageAwareEmbedder(inner, outage), OutageAwareEmbedder(inner, outage)


async def test_a_failure_spares_every_client_the_wait_until_the_pause_ends() -> None:
    clock, inner, queries, passages = pair()
    inner.down = True
    with pytest.raises(Unavailable, match="the embedder is down"):
        await queries.embed(["q"], query=True)
    assert len(inner.calls) == 1
    inner.down = False  # back, but not asked during the pause
    clock.now += 4.9
    for client in (queries, passages):
        with pytest.raises(Unavailable) as caught:
            await client.embed(["p"], query=False)
        assert caught.value.dependency == "embedder"
        assert "failed recently (the embedder is down)" in caught.value.message
        assert "asked again in 0.1 s" in caught.value.message
    with pytest.raises(Unavailable):
        await passages.info()
    assert len(inner.calls) == 1 and inner.info_calls == 0, "nothing reached the embedder"
    clock.now += 0.2
    [vector] = await passages.embed(["p"], query=False)
    assert vector.dense is not None and len(inner.calls) == 2


async def test_a_deadline_records_an_outage_too() -> None:
    class Frozen(FakeEmbedder):
        async def info(self) -> EmbedderInfo:
            raise DeadlineExceeded("Deadline Exceeded", dependency="embedder")

    clock = Clock()
    outage = EmbedderOutage(5.0, clock=clock)
    client = OutageAwareEmbedder(Frozen(), outage)
    with pytest.raises(DeadlineExceeded):
        await client.info()
    assert outage.active
    clock.now += 5.0
    assert not outage.active


async def test_a_requests_own_error_records_nothing() -> None:
    _, inner, queries, _ = pair()
    with pytest.raises(InvalidInput):
        await queries.embed(["q"], query=True, outputs=("sparse",))  # no sparse output
    [vector] = await queries.embed(["q"], query=True)
    assert vector.dense is not None and len(inner.calls) == 2
