"""The one table from an LLM API's HTTP failures to the Groundwire errors."""

from __future__ import annotations

import email.utils
import time

import pytest

from groundwire_core.errors import (
    BackendFailure,
    DeadlineExceeded,
    GroundwireError,
    Overloaded,
    Unavailable,
)
from groundwire_orchestrator.llm.failures import (
    DEFAULT_RETRY_AFTER_S,
    error_for_status,
    retry_after_s,
)


@pytest.mark.parametrize(
    ("status", "error_type", "expected"),
    [
        (529, "overloaded_error", Overloaded),
        (429, "rate_limit_error", Overloaded),
        (429, None, Overloaded),
        (500, "api_error", Unavailable),
        (502, None, Unavailable),
        (503, "server_error", Unavailable),
        (408, None, DeadlineExceeded),
        (400, "invalid_request_error", BackendFailure),
        (401, "authentication_error", BackendFailure),
        (404, "not_found_error", BackendFailure),
        # errors reported inside a 200 stream carry only their type
        (200, "overloaded_error", Overloaded),
        (200, "api_error", Unavailable),
        (200, "timeout_error", DeadlineExceeded),
        (200, "something_new", BackendFailure),
    ],
)
def test_status_and_type_map_to_one_error(
    status: int, error_type: str | None, expected: type[GroundwireError]
) -> None:
    error = error_for_status("anthropic", status, error_type=error_type)
    assert type(error) is expected
    assert error.dependency == "llm:anthropic"
    assert str(status) in error.message


def test_overloaded_carries_retry_after_from_headers() -> None:
    error = error_for_status("openai", 429, headers={"Retry-After": "7"})
    assert isinstance(error, Overloaded)
    assert error.retry_after_s == 7.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, DEFAULT_RETRY_AFTER_S),
        ({}, DEFAULT_RETRY_AFTER_S),
        (None, DEFAULT_RETRY_AFTER_S),
        ({"retry-after": "-4"}, 0.0),
    ],
)
def test_retry_after_forms(headers: dict[str, str] | None, expected: float) -> None:
    assert retry_after_s(headers) == pytest.approx(expected)


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25.0 <= retry_after_s({"Retry-After": when}) <= 30.0
