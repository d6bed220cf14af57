"""The groundwire command."""
