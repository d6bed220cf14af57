"""Per-RPC metrics and span attributes, recorded by one server interceptor.

:class:`ServerObservabilityInterceptor` sits between OpenTelemetry's server
interceptor (which opens the RPC's span) and the runtime interceptor (which maps
errors to status codes), so it sees every RPC's final code:

* ``groundwire_rpc_requests_total{service,method,code}`` and
  ``groundwire_rpc_duration_seconds{service,method}`` (a streaming RPC is timed to
  its last message), ``groundwire_rpc_in_flight{service,method}``;
* on the span: ``groundwire.request_id`` (the caller's ``x-request-id``),
  ``groundwire.rpc.code`` and, for a streaming reply, ``groundwire.rpc.messages_sent``.

Health checks and reflection are not recorded: probes would drown the real traffic.
Client- and bidi-streaming RPCs (none in our protos) pass through unrecorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import trace

from groundwire_core.context import REQUEST_ID_HEADER
from groundwire_core.metrics import RPC_IN_FLIGHT, RPC_LATENCY, RPC_REQUESTS

_UNOBSERVED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


def split_method(method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` as ``("pkg.Service", "Method")``."""
    service, _, name = method.lstrip("/").rpartition("/")
    return service or "unknown", name


def _request_id(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str):
            return value
    return None


def _final_code(context: grpc.aio.ServicerContext, error: BaseException | None) -> grpc.StatusCode:
    """The status the caller gets: the one set or aborted with, else from ``error``."""
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    # grpc answers an exception that is not an abort with UNKNOWN
    return grpc.StatusCode.OK if error is None else grpc.StatusCode.UNKNOWN


class _Observation:
    """One RPC being recorded: started on creation, finished once."""

    def __init__(self, service: str, method: str, context: grpc.aio.ServicerContext) -> None:
        self._service = service
        self._method = method
        self._context = context
        self._span = trace.get_current_span()
        self._started = time.perf_counter()
        self.messages = 0
        rid = _request_id(context)
        if rid is not None:
            self._span.set_attribute("groundwire.request_id", rid)
        RPC_IN_FLIGHT.labels(service, method).inc()

    def finish(self, error: BaseException | None, *, streaming: bool) -> None:
        code = _final_code(self._context, error).name
        RPC_IN_FLIGHT.labels(self._service, self._method).dec()
        RPC_REQUESTS.labels(self._service, self._method, code).inc()
        RPC_LATENCY.labels(self._service, self._method).observe(time.perf_counter() - self._started)
        self._span.set_attribute("groundwire.rpc.code", code)
        if streaming:
            self._span.set_attribute("groundwire.rpc.messages_sent", self.messages)


class ServerObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """Counts, times and annotates every unary and server-streaming RPC."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_UNOBSERVED_PREFIXES):
            return handler
        service, name = split_method(method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _observe_unary(service, name, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _observe_stream(service, name, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _observe_unary(
    service: str, method: str, inner: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
        observation = _Observation(service, method, context)
        try:
            reply = await inner(request, context)
        except BaseException as error:
            observation.finish(error, streaming=False)
            raise
        observation.finish(None, streaming=False)
        return reply

    return handle


def _observe_stream(
    service: str,
    method: str,
    inner: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]],
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        observation = _Observation(service, method, context)
        try:
            async for item in inner(request, context):
                observation.messages += 1
                yield item
        except BaseException as error:
            observation.finish(error, streaming=True)
            raise
        observation.finish(None, streaming=True)

    return handle
