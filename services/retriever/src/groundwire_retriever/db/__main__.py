"""``python -m groundwire_retriever.db [upgrade|current]``: the retriever's migrations, run once
per deploy (compose's one-shot migrate services, the Kubernetes migrate Job) against
GROUNDWIRE_RETRIEVER_DATABASE_URL."""

from __future__ import annotations

import sys

from groundwire_core.database import migrate_main
from groundwire_retriever.db.base import MIGRATIONS
from groundwire_retriever.settings import RetrieverSettings

if __name__ == "__main__":
    url = RetrieverSettings().database_url.get_secret_value()
    sys.exit(migrate_main(sys.argv[1:], url=url, migrations=MIGRATIONS, service="retriever"))
