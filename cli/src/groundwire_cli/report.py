"""``groundwire report --collection C``: what a docs team should write next, from the
conversations the gateway stored — the most-asked questions, the ones the documents did
not answer (declined), the ones answered on thin evidence, and the answers readers marked
wrong, each with counts (``GET /v1/admin/report``, an admin key: ``$GROUNDWIRE_ADMIN_KEY``
or ``--admin-key``). A tenant admin's key reports its tenant's conversations; the
operator's, every tenant's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx

from groundwire_cli.child_settings import user_environment
from groundwire_cli.keys import ADMIN_KEY_VARIABLE
from groundwire_cli.lifecycle import DEFAULT_GATEWAY

SECTIONS = (
    ("most_asked", "Most asked", "asked"),
    ("declined", "Declined (the documents do not answer them)", "asked"),
    ("low_evidence", "Low evidence (no supported or quoted citation, or withheld)", "asked"),
    ("marked_wrong", "Marked wrong (rated down)", "down"),
)


def add_parser(sub: Any) -> None:
    """Registers ``groundwire report`` on the command's subparsers."""
    parser = sub.add_parser(
        "report",
        help="most-asked, declined, low-evidence and marked-wrong questions of a collection",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--collection", required=True, help="the collection to report on")
    parser.add_argument(
        "--gateway", default=DEFAULT_GATEWAY, help=f"gateway URL (default: {DEFAULT_GATEWAY})"
    )
    parser.add_argument(
        "--admin-key",
        default=None,
        help=f"an admin key (default: ${ADMIN_KEY_VARIABLE}; prefer the variable: a flag "
        "shows in process listings)",
    )
    parser.add_argument("--limit", type=int, default=20, help="questions per section (1-100)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run_command)


def render(report: dict[str, Any]) -> str:
    """The report as text: a headline, then one section per list, counts first."""
    kept = report["retention_days"]
    who = report["tenant"] or "every tenant"
    lines = [
        f"{report['collection']} ({who}): {report['answers']} answers stored "
        + (f"(kept {kept} days)" if kept else "(conversations are not stored)")
        + f"; rated {report['rated_up']} up, {report['rated_down']} down"
    ]
    for key, title, unit in SECTIONS:
        entries = report[key]
        lines += ["", f"{title}: {len(entries) or 'none'}"]
        for entry in entries:
            lines.append(f"  {entry['count']:>4} {unit:<5} {entry['question']}")
            if entry["answer_ids"]:
                lines.append(f"             answers: {', '.join(entry['answer_ids'])}")
            lines += [f'             "{comment}"' for comment in entry["comments"]]
    return "\n".join(lines)


def run(args: argparse.Namespace, transport: httpx.BaseTransport | None = None) -> int:
    """Prints the report; ``transport`` is injectable for tests."""
    admin_key = args.admin_key or user_environment().get(ADMIN_KEY_VARIABLE)
    if not admin_key:
        print(f"error: an admin key is needed: set ${ADMIN_KEY_VARIABLE}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {admin_key}"}
    params: dict[str, str | int] = {"collection": args.collection, "limit": args.limit}
    try:
        with httpx.Client(
            base_url=args.gateway, headers=headers, timeout=30.0, transport=transport
        ) as client:
            response = client.get("/v1/admin/report", params=params)
    except httpx.HTTPError as error:
        print(f"error: no gateway at {args.gateway} ({type(error).__name__})", file=sys.stderr)
        return 1
    if response.status_code != 200:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:300]
        print(f"error: HTTP {response.status_code}: {message}", file=sys.stderr)
        return 1
    body = response.json()
    print(json.dumps(body, indent=2) if args.json else render(body))
    return 0


def run_command(args: argparse.Namespace) -> int:
    return run(args)
