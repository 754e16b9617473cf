"""Mutation testing of the engine: `python -m tests.mutants` (see __main__.py)."""
