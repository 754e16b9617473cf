"""The engine broken on purpose: each mutant is one small, realistic mistake in the SQL or
Python that a proof must catch.

To add a mutant, append a `Mutant` to MUTANTS: a name (a slug), one line saying what is
broken, the text replaced in each file (the `before` text must occur in the file exactly
once, or `count` times: include enough context), and the targeted tests, if any, that
should catch it beside the soak and the model test. `python -m tests.mutants --only <name>`
runs just that one. A mutant that no test can tell from the engine says why in `equivalent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edit:
    path: str
    before: str
    after: str
    # How many times `before` occurs (all are replaced): statements with variants (one
    # queue, several queues) repeat a clause, and a mutant breaks every copy.
    count: int = 1


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    edits: tuple[Edit, ...]
    # Test paths (pytest node ids) run after the soak and the model test.
    targeted: tuple[str, ...] = field(default=())
    # Why no test can tell this mutant from the engine, when that is so: it is run all the
    # same, and reported as expected to survive.
    equivalent: str = ""


QUERIES = "queue_core/sql/queries.sql"
STEPS = "queue_core/sql/steps.sql"
TRIGGERS = "queue_core/schema/triggers.sql"
RUNNER = "queue_core/tick.py"
WORKER = "queue_core/worker.py"
RECONNECT_TESTS = "tests/integration/test_runner_reconnect.py"
CONNECTION_FAULTS = "tests/faults/test_connection_faults.py"


def function(name: str) -> str:
    """The current-state file of one SQL function."""
    return f"queue_core/schema/functions/{name}.sql"


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "claim-from-retrying-free",
        "a claim from retrying does not count an attempt",
        (
            Edit(
                QUERIES,
                "    set status = 'running',\n        attempts = j.attempts + 1,\n",
                "    set status = 'running',\n"
                "        attempts = j.attempts"
                " + case when j.status = 'retrying' then 0 else 1 end,\n",
                count=2,
            ),
        ),
    ),
    Mutant(
        "reclaim-early",
        "reclaim revokes leases 1.5 s before they expire",
        (
            Edit(
                QUERIES,
                "where status = 'running' and lease_until <= clock.now\n",
                "where status = 'running' and lease_until <= clock.now + interval '1.5 seconds'\n",
            ),
        ),
    ),
    Mutant(
        "reclaim-dead-with-attempts-left",
        "reclaim sends a job dead one attempt early",
        (
            Edit(
                QUERIES,
                "when j.attempts >= j.max_attempts then 'dead'",
                "when j.attempts + 1 >= j.max_attempts then 'dead'",
            ),
        ),
    ),
    Mutant(
        "finish-without-token-check",
        "finish no longer checks the lease token",
        (Edit(QUERIES, "      and j.lease_token = o.lease_token\n", "", count=3),),
    ),
    Mutant(
        "reclaim-ignores-cancel",
        "reclaim retries a job whose cancellation was requested",
        (
            Edit(
                QUERIES,
                "case when j.cancel_requested then 'cancelled'\n                when j.attempts",
                "case when false then 'cancelled'\n                when j.attempts",
            ),
        ),
    ),
    Mutant(
        "backoff-sql-without-max",
        "the SQL backoff (used by reclaim) skips its maximum",
        (
            Edit(
                function("backoff_seconds"),
                "else least(base * power(factor, greatest(attempt - 1, 0)), max_delay) end",
                "else base * power(factor, greatest(attempt - 1, 0)) end",
            ),
        ),
    ),
    Mutant(
        "backoff-python-without-max",
        "the Python backoff (used when a handler fails) skips its maximum",
        (
            Edit(
                "queue_core/backoff.py",
                "else min(self.base * self.factor**exponent, self.max)",
                "else self.base * self.factor**exponent",
            ),
        ),
    ),
    Mutant(
        "claim-ignores-run-after",
        "the claim takes jobs whose run_after is still in the future",
        (
            Edit(
                QUERIES,
                "      and queue = %(queue)s\n"
                "      and run_after <= coalesce(%(now)s::timestamptz, now())\n",
                "      and queue = %(queue)s\n",
            ),
            Edit(
                QUERIES,
                "      and queue = any(%(queues)s::text[])\n"
                "      and run_after <= coalesce(%(now)s::timestamptz, now())\n",
                "      and queue = any(%(queues)s::text[])\n",
            ),
        ),
    ),
    Mutant(
        "idempotency-drops-succeeded",
        "the key table lets a key go once its job succeeded",
        (
            Edit(
                TRIGGERS,
                "          and new.status in ('dead', 'cancelled')\n",
                "          and new.status in ('dead', 'cancelled', 'succeeded')\n",
            ),
        ),
    ),
    Mutant(
        "key-kept-by-dead-jobs",
        "a job that dies or is cancelled keeps its idempotency key (no free trigger)",
        (
            Edit(
                function("job_keys_free"),
                "    delete from tickq.job_keys k\n"
                "    where k.idempotency_key = old.idempotency_key\n",
                "    delete from tickq.job_keys k\n    where false\n",
            ),
        ),
        targeted=("tests/integration/test_job_keys.py",),
    ),
    Mutant(
        "retry-takes-no-key",
        "a dead job sent back to the queue does not take its key again",
        (
            Edit(
                TRIGGERS,
                "          and old.status in ('dead', 'cancelled')\n",
                "          and old.status in ('dead', 'cancelled') and false\n",
            ),
        ),
        targeted=("tests/integration/test_job_keys.py",),
    ),
    Mutant(
        "plain-insert-takes-no-key",
        "only tickq's own enqueue statements take keys: a plain INSERT or COPY of a held key"
        " makes a second live job with it",
        (
            Edit(
                TRIGGERS,
                "    when (new.idempotency_key is not null and new.status not in ('dead',"
                " 'cancelled'))\n",
                "    when (new.idempotency_key is not null and new.status not in ('dead',"
                " 'cancelled') and false)\n",
            ),
        ),
        targeted=("tests/integration/test_plain_insert_keys.py",),
    ),
    Mutant(
        "sql-enqueue-no-owner",
        "tickq.enqueue ignores the transaction's user: an application's job has no owner",
        (
            Edit(
                function("enqueue"),
                "    v_owner    uuid := tickq.current_user_id();\n",
                "    v_owner    uuid := null;\n",
            ),
        ),
        targeted=("tests/security/test_sql_enqueue.py",),
    ),
    Mutant(
        "retention-keeps-keys",
        "retention deletes succeeded jobs but not their keys",
        (
            Edit(
                function("jobs_forget"),
                "    delete from tickq.job_keys k using gone g\n"
                "    where k.idempotency_key = g.idempotency_key\n",
                "    delete from tickq.job_keys k using gone g\n    where false\n",
            ),
        ),
        targeted=("tests/integration/test_job_keys.py",),
    ),
    Mutant(
        "finish-without-status-guard-alone",
        "finish no longer checks that the job is running (the token check stays)",
        (
            Edit(
                QUERIES,
                "      and j.lease_token = o.lease_token\n"
                "      and j.status in ('waiting', 'queued', 'running', 'retrying')\n",
                "      and j.lease_token = o.lease_token\n",
                count=3,
            ),
        ),
        equivalent=(
            "jobs_lease_check makes a row hold a lease token exactly while it runs, so a "
            "matching token already implies status = 'running'"
        ),
    ),
    Mutant(
        "finish-without-status-guard",
        "finish checks neither the status nor the token (writes over any row)",
        (
            Edit(
                QUERIES,
                "      and j.lease_token = o.lease_token\n"
                "      and j.status in ('waiting', 'queued', 'running', 'retrying')\n",
                "",
                count=3,
            ),
        ),
    ),
    Mutant(
        "type-limit-off-by-one",
        "the limited claim lets one job more than max_running run",
        (
            Edit(
                function("claim_limited"),
                "coalesce(l.max_running - (select count(*) from tickq.jobs r",
                "coalesce(l.max_running + 1 - (select count(*) from tickq.jobs r",
            ),
        ),
        targeted=("tests/integration/test_limits.py",),
    ),
    Mutant(
        "queue-depth-off-by-one",
        "enqueue admits one job more than a queue's max_depth",
        (
            Edit(
                function("queue_admit"),
                "where c.q = v_limits.queue) > v_limits.max_depth then",
                "where c.q = v_limits.queue) > v_limits.max_depth + 1 then",
            ),
        ),
        targeted=("tests/integration/test_limits.py",),
    ),
    Mutant(
        "step-write-without-token-check",
        "a step is stored without checking the lease token (a stale worker's step lands)",
        (
            Edit(
                STEPS,
                "    where id = %(id)s and lease_token = %(lease_token)s and status = 'running'\n"
                "    for share\n",
                "    where id = %(id)s and status = 'running'\n    for share\n",
            ),
        ),
        targeted=(
            "tests/integration/test_steps.py"
            "::test_a_worker_that_lost_its_lease_mid_step_cannot_store_that_step",
        ),
    ),
    Mutant(
        "stored-steps-not-loaded",
        "a job's stored steps do not load, so their fns run again",
        (
            Edit(
                STEPS,
                "       (select coalesce(jsonb_object_agg(s.name, s.result), '{}'::jsonb)\n"
                "        from tickq.job_steps s where s.job_id = j.id),\n",
                "       '{}'::jsonb,\n",
            ),
        ),
    ),
    Mutant(
        "lease-token-from-the-id-alone",
        "a claim's lease token derives from the job's id without the statement's random seed",
        (
            Edit(
                QUERIES,
                "sha256(uuid_send(lease.seed) || uuid_send(j.id))",
                "sha256(uuid_send(j.id))",
                count=2,
            ),
        ),
        targeted=("tests/integration/test_lease_tokens.py", "tests/integration/test_leases.py"),
    ),
    Mutant(
        "lease-token-one-per-batch",
        "every job of a batch gets the same lease token",
        (
            Edit(
                QUERIES,
                "sha256(uuid_send(lease.seed) || uuid_send(j.id))",
                "sha256(uuid_send(lease.seed))",
                count=2,
            ),
        ),
        targeted=("tests/integration/test_lease_tokens.py",),
    ),
    Mutant(
        "guard-forgets-the-step-exemptions",
        "the application guard no longer lets a signal or a fresh retry's reset through",
        (
            Edit(
                function("jobs_app_guard"),
                "                and new.signals is null))) is true then\n",
                "                and new.signals is null))) and false then\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_guard_gate.py",
            "tests/security/test_steps_security.py",
        ),
    ),
    Mutant(
        "outcomes-dropped-on-reconnect",
        "the outcomes a failed persist carried are forgotten, left to expire and run again",
        (
            Edit(
                RUNNER,
                "pipeline.owed.append((jobs, outcomes))",
                "pipeline.owed.clear()",
                count=2,
            ),
        ),
        targeted=(
            RECONNECT_TESTS,
            f"{CONNECTION_FAULTS}::test_backends_terminated_twice_a_second_never_run_a_handler_twice",
        ),
    ),
    Mutant(
        "resent-outcomes-unfenced",
        "outcomes sent again after a reconnect carry the job's current lease token, not theirs",
        (
            Edit(
                RUNNER,
                "        outcomes = [outcome for _, batch in owed for outcome in batch]\n",
                "        outcomes = [\n"
                "            __import__('dataclasses').replace(\n"
                "                outcome, lease_token=self.store.get(outcome.job_id).lease_token\n"
                "            )\n"
                "            for _, batch in owed\n"
                "            for outcome in batch\n"
                "        ]\n",
            ),
        ),
        targeted=(
            f"{RECONNECT_TESTS}::test_an_outcome_whose_lease_was_lost_meanwhile_is_dropped_not_written",
        ),
    ),
    Mutant(
        "reconnect-delay-doubles",
        "the wait between reconnect attempts doubles, so a worker sleeps through the recovery",
        (
            Edit(
                WORKER,
                "RECONNECT_SECONDS * (0.8 + 0.4 * runner.rand())",
                "RECONNECT_SECONDS * 2**attempts * (0.8 + 0.4 * runner.rand())",
            ),
        ),
        targeted=(
            "tests/unit/test_reconnect.py",
            f"{CONNECTION_FAULTS}::test_after_a_restart_the_worker_completes_a_job_within_two_seconds",
        ),
    ),
)
