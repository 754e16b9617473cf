"""Chaos soak: real worker processes, SIGKILLs and a restarted PostgreSQL."""
