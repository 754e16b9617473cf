"""Model-based tests: the pure state machine and the Postgres store, step by step."""
