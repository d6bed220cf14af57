"""Service-to-service trust: a shared token on every gRPC call between Groundwire services.

Reaching a service's port must not be enough to drop a collection or read every
document, so with ``GROUNDWIRE_SERVICE_TOKEN`` set every service refuses, with
UNAUTHENTICATED, a call that does not carry ``authorization: Bearer <token>``
metadata, and every channel our code opens attaches it (:func:`token_metadata`).

A shared token rather than mTLS: one secret to generate and rotate, carried the way
every other secret is (an env var from a Kubernetes Secret / compose), no certificate
authority to run; TLS for the wire itself stays a service-mesh concern.

What is exempt: ``grpc.health.v1`` only, because Kubernetes' native gRPC probes cannot
send metadata and health answers nothing but SERVING / NOT_SERVING. Reflection is not
exempt (it lists every method a caller could try).

Unset token = open, as before, and the server logs a warning at start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from grpc.aio import ClientCallDetails

log = logging.getLogger("groundwire.server")

METADATA_KEY = "authorization"
_EXEMPT_PREFIX = "/grpc.health.v1.Health/"
_REFUSED = "this service accepts calls from Groundwire services only (missing or wrong token)"

_DRAIN_S = 1.0
_DRAIN_MESSAGES = 16

_process_token: str | None = None


def set_process_token(token: str | None) -> None:
    """Sets the token every channel this process opens attaches (None or "" = none).

    Called once at start-up by whatever owns the settings: the server bootstrap, the
    gateway, the CLI's local cluster."""
    global _process_token
    _process_token = token or None


def process_token() -> str | None:
    """The token set by :func:`set_process_token`, if any."""
    return _process_token


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The metadata a client call carries for ``token`` (nothing when it is unset)."""
    return ((METADATA_KEY, f"Bearer {token}"),) if token else ()


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def _method(details: grpc.HandlerCallDetails) -> str:
    method: str | bytes = details.method
    return method.decode() if isinstance(method, bytes) else method


class ServiceTokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call (health excepted) without the shared token, UNAUTHENTICATED.

    The presented value is compared by digest in constant time; the refusal names
    neither the expected nor the presented value."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("an empty service token would accept every caller")
        self._expected = _digest(f"Bearer {token}")

    def allows(self, details: grpc.HandlerCallDetails) -> bool:
        """Whether the call may go on: health, or the right token in its metadata."""
        if _method(details).startswith(_EXEMPT_PREFIX):
            return True
        presented = ""
        for key, value in details.invocation_metadata or ():
            if key == METADATA_KEY and isinstance(value, str):
                presented = value
        return hmac.compare_digest(_digest(presented), self._expected)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or self.allows(handler_call_details):
            return handler
        return _refusing(handler)


async def _abort(context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, _REFUSED)


async def _drain(requests: AsyncIterator[Any]) -> None:
    """Reads what a streaming caller sent (a few messages, a second at most) before
    the refusal: answering while its writes are in flight can reach it as a reset
    stream (INTERNAL) instead of the status."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            for _ in range(_DRAIN_MESSAGES):
                await anext(requests)
    except (TimeoutError, StopAsyncIteration):
        pass


def _refusing(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED."""
    des, ser = handler.request_deserializer, handler.response_serializer

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _abort(context)

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await _abort(context)
        yield  # pragma: no cover - abort raises; this makes the function a generator

    async def client_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        await _drain(requests)
        await _abort(context)

    async def bidi(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await _drain(requests)
        await _abort(context)
        yield  # pragma: no cover - abort raises; this makes the function a generator

    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary, des, ser)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming, des, ser)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(client_stream, des, ser)
    return grpc.stream_stream_rpc_method_handler(bidi, des, ser)


def _with_token(details: ClientCallDetails, token: str) -> ClientCallDetails:
    metadata = [(k, v) for k, v in (details.metadata or ()) if k != METADATA_KEY]
    metadata.extend(token_metadata(token))
    return ClientCallDetails(
        details.method,
        details.timeout,
        grpc.aio.Metadata(*metadata),
        details.credentials,
        details.wait_for_ready,
    )


class _UnaryTokenInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(
        self,
        continuation: Callable[[ClientCallDetails, Any], Any],
        client_call_details: ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


class _StreamTokenInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    # a separate class: grpc.aio files an interceptor under the first call kind it
    # implements only (see client._StreamContextInterceptor)
    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_stream(
        self,
        continuation: Callable[[ClientCallDetails, Any], Any],
        client_call_details: ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(_with_token(client_call_details, self._token), request)


def client_interceptors(token: str | None) -> list[grpc.aio.ClientInterceptor]:
    """Interceptors that attach ``token`` to every unary and server-streaming call."""
    if not token:
        return []
    return [_UnaryTokenInterceptor(token), _StreamTokenInterceptor(token)]


def server_interceptors(token: str | None, service: str) -> list[grpc.aio.ServerInterceptor]:
    """The interceptor for ``token``, or none (with a warning: the service is open)."""
    if token:
        return [ServiceTokenInterceptor(token)]
    log.warning(
        "%s accepts gRPC calls from anyone who reaches its port: GROUNDWIRE_SERVICE_TOKEN "
        "is not set (see docs/security.md)",
        service,
    )
    return []
