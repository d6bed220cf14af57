"""Request scope: the request id and deadline bound to the task, restored after."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from groundwire_core.context import (
    current_request_id,
    new_request_id,
    request_scope,
    time_remaining,
)


def test_outside_a_request() -> None:
    assert current_request_id() == "-"
    assert time_remaining() is None


def test_scope_sets_and_restores() -> None:
    with request_scope("abc123", 5) as rid:
        assert rid == "abc123"
        assert current_request_id() == "abc123"
        remaining = time_remaining()
        assert remaining is not None and 4.5 < remaining <= 5
    assert current_request_id() == "-"
    assert time_remaining() is None


def test_nested_scopes_restore_the_outer_one() -> None:
    with request_scope("outer", 10):
        with request_scope("inner", None):
            assert current_request_id() == "inner"
            assert time_remaining() is None
        assert current_request_id() == "outer"
        remaining = time_remaining()
        assert remaining is not None and remaining > 9


def test_scope_restores_after_an_exception() -> None:
    with pytest.raises(RuntimeError), request_scope("doomed", 1):
        raise RuntimeError("boom")
    assert current_request_id() == "-"
    assert time_remaining() is None


def test_missing_request_id_gets_a_fresh_one() -> None:
    with request_scope(None, None) as first:
        assert re.fullmatch(r"[0-9a-f]{32}", first)
        assert current_request_id() == first
    with request_scope("", None) as second:
        assert second != first and len(second) == 32
    assert new_request_id() != new_request_id()


def test_time_remaining_decreases() -> None:
    with request_scope("r", 1.0):
        first = time_remaining()
        time.sleep(0.02)
        second = time_remaining()
    assert first is not None and second is not None
    assert second < first
    assert first - second >= 0.015


def test_time_remaining_goes_negative_after_the_deadline() -> None:
    with request_scope("r", 0.01):
        time.sleep(0.02)
        remaining = time_remaining()
    assert remaining is not None and remaining < 0


async def test_scopes_are_per_task() -> None:
    seen: dict[str, str] = {}
    gate = asyncio.Event()

    async def serve(rid: str) -> None:
        with request_scope(rid, 5):
            await gate.wait()
            seen[rid] = current_request_id()

    tasks = [asyncio.create_task(serve(r)) for r in ("one", "two")]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)
    assert seen == {"one": "one", "two": "two"}
    assert current_request_id() == "-"
