"""The committed OpenAPI document: ``python -m groundwire_gateway.openapi`` rewrites
services/gateway/openapi.json from the app; ``--check`` fails when it is stale."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from groundwire_gateway.app import create_app
from groundwire_gateway.settings import GatewaySettings

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.json"


def document() -> dict[str, Any]:
    """The OpenAPI document of the app (it does not depend on settings values)."""
    return create_app(GatewaySettings()).openapi()


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=COMMITTED, help="where the document goes")
    parser.add_argument("--check", action="store_true", help="exit 1 if --out is stale")
    args = parser.parse_args(argv)
    text = render(document())
    out: Path = args.out
    if args.check:
        if not out.exists() or out.read_text() != text:
            print(f"{out} is stale: run python -m groundwire_gateway.openapi", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
