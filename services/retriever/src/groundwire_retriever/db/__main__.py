"""``python -m groundwire_retriever.db [upgrade|current]``: the retriever's migrations, run once
per deploy (compose's ``migrate`` service, the Kubernetes migrate Job) against
GROUNDWIRE_RETRIEVER_DATABASE_URL."""

from __future__ import annotations

import asyncio
import sys

from groundwire_core.database import create_engine, current_revision, masked, upgrade
from groundwire_core.errors import GroundwireError
from groundwire_retriever.db.base import MIGRATIONS
from groundwire_retriever.settings import RetrieverSettings


async def _run(command: str, url: str) -> str:
    engine = create_engine(url)
    try:
        if command == "upgrade":
            await upgrade(engine, MIGRATIONS)
        return f"{masked(url)}: retriever at {await current_revision(engine, MIGRATIONS)}"
    finally:
        await engine.dispose()


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "upgrade"
    if command not in ("upgrade", "current"):
        print("usage: python -m groundwire_retriever.db [upgrade|current]", file=sys.stderr)
        return 2
    settings = RetrieverSettings()
    url = settings.database_url.get_secret_value()
    if not url:
        print("GROUNDWIRE_RETRIEVER_DATABASE_URL is not set", file=sys.stderr)
        return 2
    try:
        print(asyncio.run(_run(command, url)))
    except GroundwireError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
