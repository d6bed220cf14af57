"""Ingest and sync jobs: queued per collection, run one at a time, state in SQLite."""
