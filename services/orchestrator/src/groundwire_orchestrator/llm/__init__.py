"""LLM providers behind one interface: Anthropic, OpenAI-compatible, failover."""
