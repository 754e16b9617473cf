"""tickq's tooling: the `tickq` command line, local PostgreSQL, local invoke of the
template's functions, the local API server, the demo tasks and sample events.

May import: `queue_core`, `functions` and anything the developer's machine has (rich,
embedded PostgreSQL, cfn-lint). Nothing in `queue_core` or `functions` imports this.
"""
