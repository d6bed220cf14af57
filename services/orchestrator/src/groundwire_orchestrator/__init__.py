"""Groundwire orchestrator: the query -> retrieval -> rerank -> answer chain."""
