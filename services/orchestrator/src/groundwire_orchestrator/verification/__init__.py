"""Citation verifiers: one interface, three backends (entailment model, LLM judge,
similarity), chosen by settings and reported per citation as `method`."""
