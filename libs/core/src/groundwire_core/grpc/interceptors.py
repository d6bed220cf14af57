"""Cross-cutting work for every RPC, kept out of the handlers.

Server side (:class:`ServerRuntimeInterceptor`): binds the caller's request id and
deadline to the task, logs one line per RPC, and maps errors to gRPC status exactly
once (a GroundwireError keeps its code; anything else becomes INTERNAL with a
generic message while the traceback goes to the log only). A request body that does
not parse (corrupt wire format, invalid UTF-8 in a string field) is INVALID_ARGUMENT,
not grpc's UNKNOWN with the parser's exception text.

Client side (:class:`ClientContextInterceptor`): every outgoing call carries the
current request id, the caller's identity (``groundwire_core.identity``) and a timeout
no later than the caller's own deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from grpc.aio import ClientCallDetails

from groundwire_core.context import (
    NO_REQUEST_ID,
    REQUEST_ID_HEADER,
    current_request_id,
    request_scope,
    time_remaining,
)
from groundwire_core.errors import DeadlineExceeded, GroundwireError, InvalidInput
from groundwire_core.grpc.errors import to_status
from groundwire_core.identity import METADATA_KEYS, Identity, current_identity, identity_scope

log = logging.getLogger("groundwire.rpc")

_UNTRACED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


def _metadata_value(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key and isinstance(v, str):
            return v
    return None


async def _abort(context: grpc.aio.ServicerContext, error: GroundwireError) -> None:
    status, details, trailing = to_status(error)
    context.set_trailing_metadata(trailing)
    await context.abort(status, details)


class _MalformedRequest:
    """Stands in for a request body that did not deserialize; the handler rejects it."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` that returns a _MalformedRequest instead of raising.

    grpc answers a raising deserializer with UNKNOWN and the exception's text; this
    lets the handler answer INVALID_ARGUMENT through the one error mapping.
    """
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError, or anything a parser raises
            # DecodeError reads "Error parsing message with type 'X': <reason>"
            reason = str(exc).rsplit(": ", 1)[-1] if "parsing message" in str(exc) else ""
            return _MalformedRequest(reason or type(exc).__name__)

    return deserialize


def _reject_malformed(method: str, request: Any) -> None:
    if isinstance(request, _MalformedRequest):
        raise InvalidInput(
            f"the request to {method} is not a valid protobuf message ({request.reason})"
        )


class ServerRuntimeInterceptor(grpc.aio.ServerInterceptor):
    """Request ids, deadlines, one log line per RPC, and the error mapping."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_UNTRACED_PREFIXES):
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(method, handler.unary_unary),
                request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(method, handler.unary_stream),
                request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        return handler

    @staticmethod
    def _wrap_unary(
        method: str, inner: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with _rpc_scope(method, context):
                _reject_malformed(method, request)
                return await inner(request, context)

        return handle

    @staticmethod
    def _wrap_stream(
        method: str, inner: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]
    ) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
        async def handle(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with _rpc_scope(method, context):
                _reject_malformed(method, request)
                async for item in inner(request, context):
                    yield item

        return handle


@asynccontextmanager
async def _rpc_scope(method: str, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """One RPC: the caller's request id and deadline, its log line, its error mapping."""
    rid = _metadata_value(context, REQUEST_ID_HEADER)
    identity = Identity.from_metadata(context.invocation_metadata())
    with request_scope(rid, context.time_remaining()), identity_scope(identity):
        started = time.perf_counter()
        outcome = "OK"
        try:
            yield
        except GroundwireError as error:
            outcome = error.code
            await _abort(context, error)
        except grpc.aio.AbortError:
            outcome = "aborted"
            raise
        except Exception:
            outcome = "internal"
            log.exception("unhandled error in %s", method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error")
        finally:
            log.info("%s %s %.1fms", method, outcome, (time.perf_counter() - started) * 1e3)


def _with_context(details: ClientCallDetails) -> ClientCallDetails:
    remaining = time_remaining()
    timeout = details.timeout
    if remaining is not None:
        if remaining <= 0:
            raise DeadlineExceeded("the request's deadline passed before the call was made")
        timeout = remaining if timeout is None else min(timeout, remaining)
    metadata = list(details.metadata or ())
    rid = current_request_id()
    # Outside a request scope there is no id to pass on; the server makes one.
    if rid != NO_REQUEST_ID and not any(k == REQUEST_ID_HEADER for k, _ in metadata):
        metadata.append((REQUEST_ID_HEADER, rid))
    # The caller's identity travels like the request id; an explicit copy wins.
    identity = current_identity()
    if identity is not None and not any(k in METADATA_KEYS for k, _ in metadata):
        metadata.extend(identity.to_metadata())
    return ClientCallDetails(
        details.method,
        timeout,
        grpc.aio.Metadata(*metadata),
        details.credentials,
        details.wait_for_ready,
    )


class ClientContextInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor
):
    """Propagates the request id and the caller's deadline on every outgoing call."""

    async def intercept_unary_unary(
        self,
        continuation: Callable[[ClientCallDetails, Any], Any],
        client_call_details: ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(_with_context(client_call_details), request)

    async def intercept_unary_stream(
        self,
        continuation: Callable[[ClientCallDetails, Any], Any],
        client_call_details: ClientCallDetails,
        request: Any,
    ) -> Any:
        return await continuation(_with_context(client_call_details), request)
