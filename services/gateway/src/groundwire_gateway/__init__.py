"""Groundwire HTTP gateway: the API frontends call."""
