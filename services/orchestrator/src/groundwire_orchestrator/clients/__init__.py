"""Typed clients of the services the orchestrator calls."""
