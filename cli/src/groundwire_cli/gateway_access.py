"""How a CLI command reaches a running gateway: its URL (``--gateway``, else the one
``groundwire up`` runs, else the default address) and the caller's API key
(``--api-key``, else ``$GROUNDWIRE_API_KEY``), sent as ``Authorization: Bearer``.

Every command that calls the gateway as a caller (``chat``, ``search``, ``eval
answers --gateway``; ``mcp`` keeps its own flag of the same name) takes both, so a
gateway that requires keys, or a tenant's key that scopes the collections, works from
the terminal as it does from the page.
"""

from __future__ import annotations

import argparse

from groundwire_cli import lifecycle
from groundwire_cli.child_settings import user_environment

API_KEY_VARIABLE = "GROUNDWIRE_API_KEY"


def add_key_argument(parser: argparse.ArgumentParser) -> None:
    """``--api-key`` (default: ``$GROUNDWIRE_API_KEY``)."""
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"the gateway's API key (default: ${API_KEY_VARIABLE}; prefer the variable: a "
        "flag shows in process listings)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--gateway`` (default: the running one) and ``--api-key``."""
    parser.add_argument(
        "--gateway",
        default=None,
        help="gateway URL (default: the one `groundwire up` runs, else "
        f"{lifecycle.DEFAULT_GATEWAY})",
    )
    add_key_argument(parser)


def gateway_url(args: argparse.Namespace) -> str:
    """The gateway the command calls."""
    url: str = args.gateway or lifecycle.running_addr("gateway", lifecycle.DEFAULT_GATEWAY)
    return url.rstrip("/")


def api_key(args: argparse.Namespace) -> str | None:
    """The caller's key: the flag, else the variable, else None (anonymous)."""
    key: str | None = getattr(args, "api_key", None) or user_environment().get(API_KEY_VARIABLE)
    return key or None


def headers(args: argparse.Namespace) -> dict[str, str]:
    """The request headers carrying the caller's key (none without one)."""
    key = api_key(args)
    return {"Authorization": f"Bearer {key}"} if key else {}
