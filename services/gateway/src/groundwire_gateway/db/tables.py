"""Every table of the gateway, imported here so that ``Base.metadata`` knows them all
(the migrations' env.py and the tests import this module)."""

from __future__ import annotations

from groundwire_gateway.db import audit, conversation_tables, counters, keys

__all__ = ["audit", "conversation_tables", "counters", "keys"]
