"""Typed clients for Groundwire services used by more than one other service."""
