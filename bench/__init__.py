"""Benchmarks of tickq against PgQueuer and Procrastinate on one PostgreSQL server.

Run with `python -m bench` (full) or `python -m bench --quick` (smoke); see docs/benchmarks.md.
"""
