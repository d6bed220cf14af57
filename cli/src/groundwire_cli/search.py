"""``groundwire search QUERY``: ranked passages from a running gateway
(``POST /v1/search``), each with its heading path, score, source and the start of its
text; ``--json`` prints the response as the API gives it."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

import httpx

from groundwire_cli import gateway_access
from groundwire_cli.demo import stage_line
from groundwire_core.errors import Unavailable

SNIPPET_CHARS = 240


def add_parser(sub: Any) -> None:
    """Registers ``groundwire search`` on the command's subparsers."""
    parser = sub.add_parser(
        "search",
        help="ranked passages from the running cluster (no answer, no LLM)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("query")
    parser.add_argument("--collection", default=None, help="default: the server's")
    parser.add_argument("--limit", type=int, default=5, help="results (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON response")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default: 60)")
    gateway_access.add_arguments(parser)
    parser.set_defaults(func=run_command)


def print_results(body: Mapping[str, Any]) -> None:
    """The ranked results as the command prints them."""
    results = body.get("results", [])
    print(f"collection {body.get('collection', '?')}: {len(results)} result(s)")
    for r in results:
        path = " > ".join(r.get("heading_path") or []) or r.get("title") or r["source_id"]
        print(f"\n{r['rank']}. [{r['score']:.3f}] {path}")
        print(f"   source: {r.get('url') or r['source_id']}")
        text = " ".join(str(r.get("text", "")).split())
        if text:
            snippet = textwrap.shorten(text, width=SNIPPET_CHARS, placeholder=" …")
            print(textwrap.indent(textwrap.fill(snippet, width=88), "   "))
    if body.get("stages"):
        print(f"\nstages: {stage_line(body['stages'])}")


def run_command(args: argparse.Namespace) -> int:
    """`groundwire search`: 0 with results printed, 1 when the gateway refuses."""
    gateway = gateway_access.gateway_url(args)
    body: dict[str, Any] = {"query": args.query, "limit": args.limit}
    if args.collection:
        body["collection"] = args.collection
    try:
        with httpx.Client(
            base_url=gateway, timeout=args.timeout, headers=gateway_access.headers(args)
        ) as client:
            reply = client.post("/v1/search", json=body)
    except httpx.TransportError as error:
        raise Unavailable(
            f"no gateway answers at {gateway} ({error}); start the services with "
            "`groundwire up --detach` or point --gateway at a running gateway",
            dependency="gateway",
        ) from None
    if reply.status_code != 200:
        try:
            problem = reply.json()["error"]
            why = f"{problem['code']}: {problem['message']}"
        except (ValueError, KeyError, TypeError):
            why = reply.text[:500]
        hint = (
            f" (set ${gateway_access.API_KEY_VARIABLE} or pass --api-key)"
            if reply.status_code in (401, 403) and not gateway_access.api_key(args)
            else ""
        )
        print(f"error: search failed (HTTP {reply.status_code}) {why}{hint}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(reply.json(), indent=2))
    else:
        print_results(reply.json())
    return 0
