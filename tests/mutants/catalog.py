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
# Every claim variant (the plain claim of one queue and of several, the limited claim, the
# fair claim) leases through tickq.jobs_lease and finishes through queries.sql's finish part,
# so a mutant of a lease or finish rule is one edit that breaks every variant, and its
# targeted tests run each variant (tests/integration/test_claim_variants.py).
LEASE = "queue_core/schema/functions/jobs_lease.sql"
VARIANTS = "tests/integration/test_claim_variants.py"


def function(name: str) -> str:
    """The current-state file of one SQL function."""
    return f"queue_core/schema/functions/{name}.sql"


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "claim-from-retrying-free",
        "a claim from retrying does not count an attempt (every claim variant)",
        (
            Edit(
                LEASE,
                "    set status = 'running',\n        attempts = j.attempts + 1,\n",
                "    set status = 'running',\n"
                "        attempts = j.attempts"
                " + case when j.status = 'retrying' then 0 else 1 end,\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token",),
    ),
    Mutant(
        "claim-lease-from-the-default-alone",
        "a claim leases every job for the worker's lease seconds, not the job's own",
        (
            Edit(
                LEASE,
                "coalesce(j.lease_seconds, p_lease_seconds)",
                "coalesce(p_lease_seconds, j.lease_seconds)",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_leases_with_the_lease_rule",),
    ),
    Mutant(
        "claim-started-at-kept",
        "a job claimed again keeps the start time of its first attempt",
        (
            Edit(
                LEASE,
                "        started_at = p_now,\n",
                "        started_at = coalesce(j.started_at, p_now),\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token",),
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
        (Edit(QUERIES, "      and j.lease_token = o.lease_token\n", ""),),
        targeted=(f"{VARIANTS}::test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token",),
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
        "the plain claim (one queue or several) takes jobs whose run_after is still ahead",
        (
            Edit(
                QUERIES,
                "    where status in ('queued', 'retrying')\n"
                "      and run_after <= coalesce(%(now)s::timestamptz, now())\n\n",
                "    where status in ('queued', 'retrying')\n\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_no_job_before_its_run_after",),
    ),
    Mutant(
        "limited-claim-ignores-run-after",
        "the limited claim takes jobs whose run_after is still ahead (its pick is its own)",
        (
            Edit(
                function("claim_limited"),
                "                    and run_after <= v_now and type <> all(v_blocked)\n",
                "                    and type <> all(v_blocked)\n",
                count=2,
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_no_job_before_its_run_after",),
    ),
    Mutant(
        "fair-claim-ignores-run-after",
        "the fair claim takes jobs whose run_after is still ahead (its sweep is its own)",
        (
            Edit(
                function("claim_fair"),
                "                    and j.priority = v_level and j.group_key = g.group_key\n"
                "                    and j.run_after <= v_now\n",
                "                    and j.priority = v_level and j.group_key = g.group_key\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_no_job_before_its_run_after",),
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
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token",),
    ),
    Mutant(
        "type-limit-off-by-one",
        "the limited and fair claims let one job more than max_running run",
        (
            Edit(
                function("type_allowance"),
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
        "a claim's lease token derives from the job's id without the lease's random seed",
        (
            Edit(
                LEASE,
                "sha256(uuid_send(v_seed) || uuid_send(j.id))",
                "sha256(uuid_send(j.id))",
            ),
        ),
        targeted=(
            f"{VARIANTS}::test_a_job_claimed_again_counts_an_attempt_and_gets_a_new_token",
            "tests/integration/test_lease_tokens.py",
            "tests/integration/test_leases.py",
        ),
    ),
    Mutant(
        "lease-token-one-per-batch",
        "every job of a batch gets the same lease token",
        (
            Edit(
                LEASE,
                "sha256(uuid_send(v_seed) || uuid_send(j.id))",
                "sha256(uuid_send(v_seed))",
            ),
        ),
        targeted=(
            f"{VARIANTS}::test_a_claim_leases_with_the_lease_rule",
            "tests/integration/test_lease_tokens.py",
        ),
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
)
