"""The retriever's tables in the system of record (see base.py)."""
