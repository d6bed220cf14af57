"""Live documentation lookup: a question the collection does not cover, looked up on
the documentation sites the collection was synced from (see ``lookup``)."""

from groundwire_retriever.live.lookup import LiveFetch, LiveLookup, LivePolicy, LiveResult

__all__ = ["LiveFetch", "LiveLookup", "LivePolicy", "LiveResult"]
