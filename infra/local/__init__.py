"""Local tooling: an embedded PostgreSQL (and PgBouncer), the local API server, invoking the
Lambda handlers on this machine, and the demo.
"""
