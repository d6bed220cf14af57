"""``groundwire mcp --gateway URL [--api-key KEY]``: a gateway's MCP server over stdio,
for desktop clients that start a command (Claude Desktop, IDEs).

A bridge, not a second implementation: it connects to the gateway's ``/mcp``
(streamable HTTP; the key sent as ``Authorization: Bearer``) and relays tools,
results and document resources as the gateway gives them, so the tool descriptions,
the keys and the limits are the gateway's alone. stdout carries the protocol; any
message for people goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError, stdio_server
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
)

from groundwire_cli.child_settings import user_environment
from groundwire_cli.lifecycle import DEFAULT_GATEWAY

API_KEY_VARIABLE = "GROUNDWIRE_API_KEY"
# MCP's own client defaults: connect within 30 s; an `ask` may stream for minutes
TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def add_parser(sub: Any) -> None:
    """Registers ``groundwire mcp`` on the command's subparsers."""
    parser = sub.add_parser(
        "mcp",
        help="serve a gateway's MCP tools (search, ask, list_collections, read_document) "
        "over stdio, for Claude Desktop and other MCP clients",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--gateway", default=DEFAULT_GATEWAY, help=f"gateway URL (default: {DEFAULT_GATEWAY})"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"the gateway's API key (default: ${API_KEY_VARIABLE}; prefer the variable: "
        "a flag shows in process listings)",
    )
    parser.set_defaults(func=run_command)


class Refusals:
    """Keeps the gateway's last 401/403 answer: the SDK reports it as a bare protocol
    error, and the person reading stderr needs the API's reason."""

    def __init__(self) -> None:
        self.last = ""

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            await response.aread()
            self.last = f"HTTP {response.status_code}: {response.text[:500]}"


def run_command(args: argparse.Namespace) -> int:
    key = args.api_key or user_environment().get(API_KEY_VARIABLE) or None
    refusals = Refusals()
    try:
        anyio.run(bridge, args.gateway.rstrip("/") + "/mcp", key, refusals)
    except (MCPError, httpx2.HTTPError, OSError, ExceptionGroup) as error:
        why = refusals.last or repr(root_cause(error))
        print(f"error: the MCP endpoint of {args.gateway}: {why}", file=sys.stderr)
        return 1
    return 0


def root_cause(error: BaseException) -> BaseException:
    """The first leaf of the task groups' exception groups (what actually failed)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def bridge(url: str, api_key: str | None, refusals: Refusals | None = None) -> None:
    """Serves stdio until the desktop client closes it, relaying every call to ``url``.
    Raises MCPError or httpx2.HTTPError when the gateway refuses or cannot be reached."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    hooks: dict[str, list[Callable[..., Any]]] = {"response": [refusals]} if refusals else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT, event_hooks=hooks) as http,
        Client(streamable_http_client(url, http_client=http)) as remote,
    ):
        # the first call fails fast on a wrong URL or key, before a client connects
        await remote.list_tools()
        server = relay(remote)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def relay(remote: Client) -> Server[Any]:
    """A low-level server whose handlers forward each request to ``remote``."""
    info = remote.server_info

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return await remote.list_tools(cursor=params.cursor if params else None)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        return await remote.call_tool(params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return await remote.list_resources(cursor=params.cursor if params else None)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return await remote.list_resource_templates(cursor=params.cursor if params else None)

    async def read_resource(
        ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult | InputRequiredResult:
        return await remote.read_resource(str(params.uri))

    server: Server[Any] = Server(
        info.name if info else "groundwire",
        version=info.version if info else "",
        instructions=remote.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    return server
