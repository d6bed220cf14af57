"""Client side: channels with the runtime interceptors, and the one error mapper."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from grpc.aio import ClientCallDetails
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from groundwire_core.grpc.errors import from_rpc_error
from groundwire_core.grpc.interceptors import ClientContextInterceptor
from groundwire_core.grpc.server import MAX_MESSAGE_BYTES, client_keepalive_options
from groundwire_core.grpc.service_auth import client_interceptors, process_token

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Reconnect quickly after a dependency restarts: the default backoff grows to
    # two minutes, which would keep a recovered reranker unused that long.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    ("grpc.enable_retries", 0),
    ("grpc.lb_policy_name", "round_robin"),
    # the server's ping policy is derived from the same interval (server.py)
    *client_keepalive_options(),
]


class _StreamContextInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    """:class:`ClientContextInterceptor` for server-streaming calls.

    grpc.aio files an interceptor under the first call kind it implements only
    (unary-unary for ClientContextInterceptor): without this one, streaming calls
    (Ask, Ingest) would carry neither the request id nor the caller's deadline.
    """

    def __init__(self) -> None:
        self._inner = ClientContextInterceptor()

    async def intercept_unary_stream(
        self,
        continuation: Callable[[ClientCallDetails, Any], Any],
        client_call_details: ClientCallDetails,
        request: Any,
    ) -> Any:
        return await self._inner.intercept_unary_stream(continuation, client_call_details, request)


def create_channel(target: str, service_token: str | None = None) -> grpc.aio.Channel:
    """An insecure channel to ``target`` carrying request ids, deadlines and traces,
    and the service token (``service_token``, else the process's: see
    ``service_auth.set_process_token``) on every call.

    ``dns:///host:port`` targets resolve every address, and round-robin spreads calls
    across them (a headless Kubernetes Service gives one address per replica).
    """
    interceptors: list[grpc.aio.ClientInterceptor] = [
        *aio_client_interceptors(),
        ClientContextInterceptor(),
        _StreamContextInterceptor(),
        *client_interceptors(service_token or process_token()),
    ]
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=interceptors)


@contextmanager
def rpc_errors(callee: str) -> Iterator[None]:
    """Turns an AioRpcError raised inside into the matching GroundwireError."""
    try:
        yield
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, callee) from None


async def check_health(
    channel: grpc.aio.Channel, service: str = "", timeout_s: float = 1.0
) -> tuple[bool, float, str]:
    """Probes grpc.health.v1 on ``channel``: (serving, latency ms, reason if not)."""
    stub = health_pb2_grpc.HealthStub(channel)
    started = time.perf_counter()
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
    except grpc.aio.AioRpcError as error:
        ms = (time.perf_counter() - started) * 1e3
        return False, ms, f"{error.code().name.lower()}: {error.details() or ''}".strip(": ")
    ms = (time.perf_counter() - started) * 1e3
    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return serving, ms, "" if serving else name.lower()
