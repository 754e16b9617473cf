"""tickq's tooling: the `tickq` command line, local PostgreSQL, local invoke of the
template's functions, the local API server, the demo tasks and sample events.

Installed as `tickq.infra`. May import: `queue_core`, `tickq.functions` and anything the
developer's machine has (rich, the `local` extra). Nothing in `queue_core` or
`tickq.functions` imports this.
"""
