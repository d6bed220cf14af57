"""One small component per stage of the chain, each with typed input and output."""
