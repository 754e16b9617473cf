"""tickq's Lambda shell: one module per function in template.yaml, plus what they share.
Installed as `tickq.functions`, the name the template's Handler strings use.

Lives here: the handlers (parse the event, call `queue_core`, shape the response), the
database connection and settings read once per environment, AWS calls, observability and
the HTTP error mapping.

May import: `queue_core`, the standard library and the `aws` extra (Powertools, boto3,
pydantic). Never `tickq.infra`: tooling drives the shell, never the other way round.
"""
