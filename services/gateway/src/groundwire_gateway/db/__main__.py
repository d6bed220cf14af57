"""``python -m groundwire_gateway.db [upgrade|current]``: the gateway's migrations, run once
per deploy (compose's one-shot migrate services, the Kubernetes migrate Job) against
GROUNDWIRE_GATEWAY_DATABASE_URL."""

from __future__ import annotations

import sys

from groundwire_core.database import migrate_main
from groundwire_gateway.db.base import MIGRATIONS
from groundwire_gateway.settings import GatewaySettings

if __name__ == "__main__":
    url = GatewaySettings().database_url.get_secret_value()
    sys.exit(migrate_main(sys.argv[1:], url=url, migrations=MIGRATIONS, service="gateway"))
