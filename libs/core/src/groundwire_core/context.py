"""Per-request context that crosses hops: the request id and the deadline.

Set by the server interceptor (or the gateway's middleware) from the incoming call,
read by the client interceptors so that every outgoing call carries the same
request id and never outlives the caller's deadline.
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

REQUEST_ID_HEADER = "x-request-id"
NO_REQUEST_ID = "-"

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar(
    "request_id", default=NO_REQUEST_ID
)
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


def new_request_id() -> str:
    """A fresh request id (32 hex characters)."""
    return uuid.uuid4().hex


def current_request_id() -> str:
    """The request id of the request being served, or "-" outside one."""
    return _request_id.get()


def time_remaining() -> float | None:
    """Seconds left before the current request's deadline; None when it has none."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


@contextmanager
def request_scope(request_id: str | None, timeout_s: float | None) -> Iterator[str]:
    """Binds a request id and a deadline (``timeout_s`` from now) to the current task."""
    rid = request_id or new_request_id()
    rid_token = _request_id.set(rid)
    deadline_token = _deadline.set(None if timeout_s is None else time.monotonic() + timeout_s)
    try:
        yield rid
    finally:
        _deadline.reset(deadline_token)
        _request_id.reset(rid_token)
