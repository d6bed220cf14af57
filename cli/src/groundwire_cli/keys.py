"""``groundwire keys create|list|revoke``: scoped API keys, through the gateway's admin
API (``/v1/admin/keys``) with an admin key (``$GROUNDWIRE_ADMIN_KEY``, or
``--admin-key``).

``create`` prints the new key once, on stdout alone (``KEY=$(groundwire keys create
…)`` keeps it), and its id and scope on stderr; the gateway stores only its digest, so
a lost key is revoked and replaced, never shown again.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from groundwire_cli.child_settings import user_environment
from groundwire_cli.lifecycle import DEFAULT_GATEWAY

ADMIN_KEY_VARIABLE = "GROUNDWIRE_ADMIN_KEY"
ROLES = ("read", "write", "admin")


def add_parser(sub: Any) -> None:
    """Registers ``groundwire keys`` on the command's subparsers."""
    parser = sub.add_parser(
        "keys",
        help="create, list and revoke scoped API keys (tenant, role, collections)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--gateway", default=DEFAULT_GATEWAY, help=f"gateway URL (default: {DEFAULT_GATEWAY})"
    )
    parser.add_argument(
        "--admin-key",
        default=None,
        help=f"an admin key (default: ${ADMIN_KEY_VARIABLE}; prefer the variable: a flag "
        "shows in process listings)",
    )
    actions = parser.add_subparsers(dest="keys_command", required=True)
    create = actions.add_parser("create", help="create a key; prints it once")
    create.add_argument("--role", choices=ROLES, required=True)
    create.add_argument("--tenant", default=None, help="default: the admin key's tenant")
    create.add_argument(
        "--collection",
        action="append",
        dest="collections",
        default=None,
        help="limit the key to this collection (repeat for more; default: all the tenant's)",
    )
    create.add_argument("--name", default="", help="a label: who or what the key is for")
    listing = actions.add_parser("list", help="list keys (ids and scopes, never the keys)")
    listing.add_argument("--tenant", default=None, help="one tenant's (operator keys only)")
    revoke = actions.add_parser("revoke", help="revoke a key by its id, at once")
    revoke.add_argument("key_id", help="the key's id (8 hex characters, from `keys list`)")
    parser.set_defaults(func=run_command)


def _scope(key: dict[str, Any]) -> str:
    cols = ",".join(key["collections"]) if key["collections"] is not None else "*"
    label = f"  {key['name']}" if key["name"] else ""
    return f"{key['key_id']}  {key['tenant']:<16} {key['role']:<6} {cols}{label}"


def _refused(response: httpx.Response) -> int:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:300]
    print(f"error: HTTP {response.status_code}: {message}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace, transport: httpx.BaseTransport | None = None) -> int:
    """Runs one ``keys`` action; ``transport`` is injectable for tests."""
    admin_key = args.admin_key or user_environment().get(ADMIN_KEY_VARIABLE)
    if not admin_key:
        print(f"error: an admin key is needed: set ${ADMIN_KEY_VARIABLE}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(
        base_url=args.gateway, headers=headers, timeout=30.0, transport=transport
    ) as client:
        if args.keys_command == "create":
            body = {
                "role": args.role,
                "tenant": args.tenant,
                "collections": args.collections,
                "name": args.name,
            }
            response = client.post("/v1/admin/keys", json=body)
            if response.status_code != 201:
                return _refused(response)
            made = response.json()
            print(f"created {_scope(made)} (shown once: store it now)", file=sys.stderr)
            print(made["key"])
            return 0
        if args.keys_command == "list":
            params = {"tenant": args.tenant} if args.tenant else {}
            response = client.get("/v1/admin/keys", params=params)
            if response.status_code != 200:
                return _refused(response)
            for key in response.json()["keys"]:
                print(_scope(key))
            return 0
        response = client.delete(f"/v1/admin/keys/{args.key_id}")
        if response.status_code != 204:
            return _refused(response)
        print(f"revoked {args.key_id}", file=sys.stderr)
        return 0


def run_command(args: argparse.Namespace) -> int:
    return run(args)
