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


# The statement files (one per module that runs them): an edit of a statement names them
# all, and the one that holds its text is edited (tests/mutants/__main__.py, `apply`).
QUERIES = "queue_core/*/*.sql"
CLAIM = "queue_core/postgres/claim.py"
STEPS = "queue_core/postgres/steps.sql"
TRIGGERS = "queue_core/schema/triggers.sql"
RUNNER = "queue_core/runner/runner.py"
STREAM = "queue_core/runner/stream.py"
STREAM_TESTS = "tests/integration/test_runner_stream.py"
TRANSITIONS = "queue_core/model/transitions.py"
WORKER = "queue_core/runner/worker_rule.py"
RECONNECT_TESTS = "tests/integration/test_runner_reconnect.py"
CONNECTION_FAULTS = "tests/faults/test_connection_faults.py"
# Every claim variant (the plain claim of one queue and of several, the limited claim, the
# fair claim) leases through tickq.jobs_lease and finishes through queries.sql's finish part,
# so a mutant of a lease or finish rule is one edit that breaks every variant, and its
# targeted tests run each variant (tests/integration/test_claim_variants.py).
LEASE = "queue_core/schema/functions/jobs_lease.sql"
VARIANTS = "tests/integration/test_claim_variants.py"
# Handler semantics: transactional completion and batch consume.
TRANSACTIONAL = "queue_core/postgres/transactional.py"
HANDLER_BATCH = "queue_core/runner/batch_handler.py"
TRANSACTIONAL_TESTS = "tests/integration/test_transactional.py"
TRANSACTIONAL_EVENTS = "tests/integration/test_transactional_events.py"
BATCH_TESTS = "tests/integration/test_handler_batches.py"
HANDLER_PROCESSES = "tests/e2e/test_handler_semantics_done_when.py"
OPERATOR_VIEW = "tests/integration/test_operator_job_view.py"
WORKFLOWS = "tests/integration/test_workflows.py"
TIMEOUT_TESTS = "tests/integration/test_runner_timeouts.py"
ABANDONED_BOUND = "tests/integration/test_abandoned_bound.py"
TIMEOUT_VIEWS = "tests/integration/test_timeout_views.py"
SUSPENDED_SHOWN = "tests/integration/test_suspended_shown.py"
WORKFLOWS_E2E = "tests/e2e/test_workflows_done_when.py"
CLAIM_REPLY_LOST = "tests/integration/test_claim_reply_lost.py"
SAGA_PATHS = "tests/integration/test_saga_paths.py"
# Safe deploys: job.patched, and the replay of `tickq deploy check`.
STEP_CONTEXT = "queue_core/runner/durable_context.py"
REPLAY = "queue_core/runner/replay.py"
CODE_VERSIONS = "tests/integration/test_code_versions.py"
DEPLOYS_E2E = "tests/e2e/test_deploys_done_when.py"
SIGNAL_WAKES = "tests/integration/test_signal_wakes.py"
CLAIM_ORDER = "tests/unit/test_claim_order_shared.py"
SIGNAL_API = "tests/functions/test_api_steps.py"
# The claim's choice of variant (queue_core/postgres/claim.py), after paused queues are left
# out of it.
PAUSE_FILTER = (
    "        if limit:  # paused queues are left out of the claim (queue_core/policies/pauses.py)\n"
    "            queues, limit = claimable("
    "queues, limit, self.paused.current(self._paused_queues))\n"
)
FAIR_CHOICE = (
    "        if limit and self._claims_fairly(queues):\n"
    "            return self._finish_and_claim_fair("
    "outcomes, queues, limit, lease_seconds, now, seed)\n"
)
# The pinned claim (TICKQ_PIN_VERSION), chosen between the two.
PINNED_CHOICE = (
    "        if limit and self.pin_version is not None:\n"
    "            return self._finish_and_claim_pinned(\n"
    "                outcomes, queues, limit, lease_seconds, now, seed, self.pin_version\n"
    "            )\n"
)
PLAIN_CHOICE = "        # The plain claim, inline: it runs once per batch of every worker.\n"
FLOW_TESTS = "tests/integration/test_flow_keys.py"
FLOW_MODEL = "tests/model/test_flow_matches_model.py"


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
                "        attempts = least(j.attempts + 1, j.max_attempts),\n",
                "        attempts = least(j.attempts"
                " + case when j.status = 'retrying' then 0 else 1 end, j.max_attempts),\n",
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
                "when o.attempts >= o.max_attempts then 'dead'",
                "when o.attempts + 1 >= o.max_attempts then 'dead'",
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
                "when o.cancel_requested and o.spare is not null then 'cancelled'\n",
                "when false then 'cancelled'\n",
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
                "queue_core/model/backoff.py",
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
                "      and run_after <= coalesce(%(now)s::timestamptz, now())\n"
                "      and not (select limited from guard)\n\n",
                "    where status in ('queued', 'retrying')\n"
                "      and not (select limited from guard)\n\n",
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
                "                          and j.group_key = g.group_key\n"
                "                          and j.run_after <= v_now\n",
                "                          and j.group_key = g.group_key\n",
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
        "the SQL enqueue ignores the transaction's user: an application's job has no owner",
        (
            Edit(
                function("enqueue_many"),
                "    v_owner uuid := tickq.app_user('enqueue');\n",
                "    v_owner uuid := null;\n",
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
                count=3,  # the step insert, and a step try's and an undo's record
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
                function("lease_token"),
                "sha256(uuid_send(p_seed) || uuid_send(p_id))",
                "sha256(uuid_send(p_id))",
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
                function("lease_token"),
                "sha256(uuid_send(p_seed) || uuid_send(p_id))",
                "sha256(uuid_send(p_seed))",
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
                "                 and old.wait_name = v_sent"
                " and new.run_after < old.run_after))) is true then\n",
                "                 and old.wait_name = v_sent"
                " and new.run_after < old.run_after))) and false then\n",
            ),
            Edit(
                function("jobs_app_guard"),
                "        and new.wait_until is null and new.signals is null) is true then\n",
                "        and new.wait_until is null and new.signals is null) and false then\n",
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
                "queue_core/runner/pipeline.py",
                "        self.owed += [batch for batch in batches if batch is not None]\n",
                "        self.owed = []\n",
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
    # The tenancy bounds of the application role (jobs_app_guard, jobs_app_admit and the
    # dependency and signal triggers): each rule broken alone.
    Mutant(
        "guard-signal-moves-the-wait",
        "a signal delivery may also move the wait columns and resumes (the two-statement walk)",
        (
            Edit(
                function("jobs_app_guard"),
                "    if (v_moved <@ array['signals', 'run_after', 'updated_at']\n",
                "    if (v_moved <@ array['signals', 'run_after', 'updated_at', 'wait_kind',"
                " 'wait_name', 'resumes']\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_the_guard_cannot_be_walked_past_in_two_statements",
            "tests/security/test_guard_property.py",
        ),
    ),
    Mutant(
        "guard-accepts-unreadable-times",
        "the guard lets an application write -infinity or the year 10000",
        (
            Edit(
                function("jobs_app_guard"),
                "    if not (tickq.readable_time(new.run_after)"
                " and tickq.readable_time(new.updated_at)\n",
                "    if false and not (tickq.readable_time(new.run_after)"
                " and tickq.readable_time(new.updated_at)\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py"
            "::test_a_signal_cannot_wake_a_job_to_a_time_a_worker_could_not_read",
            "tests/security/test_tenancy_bounds.py"
            "::test_a_cancel_cannot_write_a_time_a_worker_could_not_read",
            "tests/security/test_guard_property.py",
        ),
    ),
    Mutant(
        "guard-cancel-writes-any-error",
        "an application's cancel may write any error text",
        (
            Edit(
                function("jobs_app_guard"),
                "        and (not 'error' = any(v_moved)\n",
                "        and (true\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_the_app_role_cannot_write_an_error_on_cancel",
        ),
    ),
    Mutant(
        "admit-run-after-unbounded",
        "an application's run_after may be centuries ahead",
        (
            Edit(
                function("jobs_app_admit"),
                "    if new.run_after > now() + interval '366 days' then\n",
                "    if new.run_after > now() + interval '366000 days' then\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_the_api_refuses_a_run_after_more_than_366_days_ahead",
        ),
    ),
    Mutant(
        "admit-depth-ignores-waiting",
        "a queue's maximum depth does not count jobs waiting for parents",
        (
            Edit(
                function("jobs_app_admit"),
                "                      where j.queue = new.queue and j.status = 'waiting'\n",
                "                      where j.queue = new.queue"
                " and j.status = 'waiting' and false\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_max_depth_counts_children_waiting_for_a_parent",
        ),
    ),
    Mutant(
        "admit-per-owner-counts-everyone",
        "the cap per owner counts every owner's jobs",
        (
            Edit(
                function("jobs_app_admit"),
                "              where j.user_id = new.user_id and j.queue = new.queue\n",
                "              where j.queue = new.queue\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_max_depth_per_owner_leaves_room_for_other_owners",
        ),
    ),
    Mutant(
        "edges-of-any-owner",
        "a dependency edge may join another owner's job",
        (
            Edit(
                function("job_dependencies_app_admit"),
                "          and j.user_id is not distinct from new.user_id) <> 2 then\n",
                "          ) <> 2 then\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_the_app_role_cannot_link_its_jobs_to_another_owners",
        ),
    ),
    Mutant(
        "children-unbounded",
        "a parent may have any number of children",
        (
            Edit(
                function("job_dependencies_app_admit"),
                "    if v_children > 1000 then\n",
                "    if v_children > 1001 then\n",
            ),
        ),
        targeted=("tests/security/test_tenancy_bounds.py::test_children_per_parent_are_bounded",),
    ),
    Mutant(
        "signals-unbounded-in-sql",
        "plain SQL inserts of signals are not counted",
        (
            Edit(
                function("job_signals_app_admit"),
                "       > 100 then\n",
                "       > 101 then\n",
            ),
        ),
        targeted=(
            "tests/security/test_tenancy_bounds.py::test_the_app_role_cannot_insert_signals_past_the_bound_in_sql",
        ),
    ),
    Mutant(
        "reclaim-gives-up-on-connection-error",
        "a reclaim pass (a tick's, MaintenanceFunction's) ends on a lost connection, not reconnect",
        (
            Edit(
                RUNNER,
                "            except DatabaseError as exc:\n                rule.failed(exc)\n",
                "            except DatabaseError:\n                raise\n",
            ),
        ),
        targeted=(
            "tests/functions/test_maintenance.py"
            "::test_a_connection_lost_during_reclaim_is_reopened_and_the_pass_completes",
            f"{RECONNECT_TESTS}::test_a_ticks_reclaim_whose_connection_died_runs_again_on_the_next",
        ),
    ),
    # Priority, global and the owner's own, in each claim variant: the same mistake made in
    # one variant alone is caught by that variant's run of the same targeted test.
    Mutant(
        "plain-claim-ignores-priority",
        "the plain claim (one queue or several) orders a level's jobs without the level",
        (
            Edit(
                QUERIES,
                "    order by priority desc, owner_priority desc, run_after, created_at\n",
                "    order by owner_priority desc, run_after, created_at\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_the_higher_priority_first",),
    ),
    Mutant(
        "limited-claim-ignores-priority",
        "the limited claim orders jobs without their level (its pick is its own)",
        (
            Edit(
                function("claim_limited"),
                "order by priority desc, owner_priority desc, run_after, created_at",
                "order by owner_priority desc, run_after, created_at",
                count=2,
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_the_higher_priority_first",),
    ),
    Mutant(
        "fair-claim-ignores-priority",
        "the fair claim starts at the lowest level (its sweep is its own)",
        (
            Edit(
                function("claim_fair"),
                "        order by j.priority desc\n        limit 1;\n",
                "        order by j.priority\n        limit 1;\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_takes_the_higher_priority_first",),
    ),
    Mutant(
        "plain-claim-ignores-owner-priority",
        "the plain claim orders an owner's jobs by age alone, not by the owner's priority",
        (
            Edit(
                QUERIES,
                "    order by priority desc, owner_priority desc, run_after, created_at\n",
                "    order by priority desc, run_after, created_at\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_orders_an_owners_jobs_by_the_owners_priority",),
    ),
    Mutant(
        "limited-claim-ignores-owner-priority",
        "the limited claim orders an owner's jobs by age alone",
        (
            Edit(
                function("claim_limited"),
                "order by priority desc, owner_priority desc, run_after, created_at",
                "order by priority desc, run_after, created_at",
                count=2,
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_orders_an_owners_jobs_by_the_owners_priority",),
    ),
    Mutant(
        "fair-claim-splits-share-over-groups",
        "the fair claim splits a tenant's share evenly over its groups: a tenant of a group"
        " with fewer jobs than its part comes out short while another tenant takes more",
        (
            Edit(
                function("claim_fair"),
                "                        limit v_share\n",
                "                        limit (v_share + (select count(*)::int from"
                " unnest(v_tenant_of) t where t = g.tenant) - 1) / (select count(*)::int"
                " from unnest(v_tenant_of) t where t = g.tenant)\n",
            ),
        ),
        targeted=(
            "tests/integration/test_fairness_property.py::"
            "test_the_fair_claim_keeps_the_round_robin_bound",
        ),
    ),
    Mutant(
        "fair-claim-ignores-owner-priority",
        "the fair claim takes a group's oldest jobs, not its owner's first",
        (
            Edit(
                function("claim_fair"),
                "                        order by j.owner_priority desc,"
                " j.run_after, j.created_at\n"
                "                        limit v_share\n",
                "order by j.run_after, j.created_at\n                        limit v_share\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_claim_orders_an_owners_jobs_by_the_owners_priority",),
    ),
    Mutant(
        "batch-order-ignores-owner-priority",
        "a claimed batch runs in an order without the owner's priority (every claim variant)",
        (
            Edit(
                TRANSITIONS,
                "    return (-job.priority, -job.owner_priority, job.run_after, job.created_at)\n",
                "    return (-job.priority, 0, job.run_after, job.created_at)\n",
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_batch_runs_an_owners_jobs_in_the_owners_priority_order",),
    ),
    # Tenancy in the claim.
    Mutant(
        "app-priority-global",
        "an application user's priority stays a global level",
        (Edit(function("jobs_app_own"), "    if new.priority <> 0 then\n", "    if false then\n"),),
        targeted=(
            "tests/security/test_tenant_turns.py::test_a_tenants_top_priority_does_not_overtake_another_tenants_job",
        ),
    ),
    Mutant(
        "app-group-any-tenant",
        "an application user's job may name any group, so any tenant",
        (
            Edit(
                function("jobs_app_own"),
                "    if new.user_id is not null and split_part(new.group_key, '/', 1)",
                "    if false and split_part(new.group_key, '/', 1)",
            ),
        ),
        targeted=(
            "tests/security/test_tenant_turns.py::test_the_app_role_cannot_invent_tenants_or_join_another_in_sql",
        ),
    ),
    Mutant(
        "fair-claim-tenant-major",
        "the fair claim lets one tenant take the whole batch before the next tenant's turn",
        (
            Edit(
                function("claim_fair"),
                "        v_share := (v_want + cardinality(v_tenants) - 1)"
                " / cardinality(v_tenants);\n",
                "        v_share := v_want;\n",
            ),
            Edit(
                function("claim_fair"),
                "coalesce(array_agg(c.id order by c.tenant_rank, c.tenant), '{}')",
                "coalesce(array_agg(c.id order by c.tenant, c.tenant_rank), '{}')",
            ),
        ),
        targeted=(
            "tests/integration/test_tenant_fairness.py::test_a_tenants_many_groups_share_one_turn",
        ),
    ),
    Mutant(
        "fair-claim-tenant-groups-restart",
        "the fair claim starts every tenant's groups at its first, forgetting where it was",
        (
            Edit(
                function("fair_tenant_groups"),
                "    v_key     text := p_after;\n",
                "    v_key     text := null;\n",
            ),
            Edit(
                function("fair_tenant_groups"),
                "    v_wrapped boolean := p_after is null;\n",
                "    v_wrapped boolean := true;\n",
            ),
        ),
        targeted=(
            "tests/integration/test_tenant_fairness.py::test_a_tenants_turns_go_round_its_groups",
        ),
    ),
    Mutant(
        "complete-in-unfenced",
        "a completion in a handler's transaction does not check the lease token",
        (
            Edit(
                QUERIES,
                "set completed_in_transaction = true\nwhere id = %(id)s\n"
                "  and lease_token = %(lease_token)s\n",
                "set completed_in_transaction = true\nwhere id = %(id)s\n",
            ),
            Edit(
                TRANSACTIONAL,
                "    if row.id not in _finish(conn, outcome):\n        raise LeaseLost(row.id)\n",
                "    _finish(conn, outcome)\n",
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_handler_whose_lease_was_taken_over_cannot_commit_its_row",
            f"{HANDLER_PROCESSES}::test_a_late_worker_whose_job_was_claimed_again_cannot_commit_its_row",
        ),
    ),
    Mutant(
        "outcome-after-commit",
        "the worker sends a second outcome for a job its handler's transaction completed",
        (Edit("queue_core/model/jobs.py", "            and not self.in_transaction\n", ""),),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_transactional_handlers_row_and_its_jobs_success_commit_together",
        ),
    ),
    Mutant(
        "transactional-success-without-event",
        "a success completed in the handler's transaction writes no event its task opted into",
        (
            Edit(
                TRANSACTIONAL,
                "    outcome = with_opted_event(opted, row, outcome)\n",
                "",
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_EVENTS}::test_a_transactional_success_writes_one_job_succeeded_event_in_the_handlers_transaction",
            f"{TRANSACTIONAL_EVENTS}::test_complete_in_on_a_job_claimed_by_hand_writes_the_events_it_is_given",
        ),
    ),
    Mutant(
        "transactional-failure-without-event",
        "a transactional handler's failure, finished after its transaction rolled back, writes"
        " no event its task opted into",
        (
            Edit(
                RUNNER,
                "            return with_event(task, job,"
                " self._settle(context, self._judge(job, exc)))\n"
                "        if log.isEnabledFor(logging.INFO):\n"
                '            log.info("job succeeded in its handler\'s transaction"',
                "            return self._settle(context, self._judge(job, exc))\n"
                "        if log.isEnabledFor(logging.INFO):\n"
                '            log.info("job succeeded in its handler\'s transaction"',
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_EVENTS}::test_every_outcome_of_a_transactional_handler_writes_the_events_a_plain_handler_writes",
        ),
    ),
    Mutant(
        "batch-call-over-size",
        "a batch handler call holds one job more than its batch size",
        (
            Edit(
                HANDLER_BATCH,
                "if chunk is None or len(chunk) >= size:",
                "if chunk is None or len(chunk) > size:",
            ),
        ),
        targeted=(
            f"{BATCH_TESTS}::test_120_jobs_go_in_calls_of_at_most_50_each_with_its_own_result_and_one_failure_retries_alone",
        ),
    ),
    Mutant(
        "batch-fail-ignored",
        "batch.fail and batch.retry_after count only when the call raises",
        (
            Edit(
                HANDLER_BATCH,
                "            settled = self._settled.get(row.id)\n",
                "            settled = self._settled.get(row.id) if raised else None\n",
            ),
        ),
        targeted=(
            f"{BATCH_TESTS}::test_120_jobs_go_in_calls_of_at_most_50_each_with_its_own_result_and_one_failure_retries_alone",
        ),
    ),
    Mutant(
        "debounce-past-max-seconds",
        "a debounced job's run time moves past its first enqueue + max_seconds",
        (
            Edit(
                function("job_gate"),
                "v_gate.first_at + p_max_seconds * interval '1 second');\n",
                "v_now + p_seconds * interval '1 second');\n",
            ),
        ),
        targeted=(
            "tests/integration/test_gates.py::test_a_burst_of_debounced_enqueues_makes_one_job_with_the_last_payload",
            "tests/model/test_gates_match_model.py",
        ),
    ),
    Mutant(
        "gate-key-not-per-owner",
        "a gate's key is looked up across owners, not per owner",
        (
            Edit(
                function("job_gate"),
                "    where g.kind = p_kind and g.gate_key = p_key\n"
                "      and coalesce(g.user_id, '00000000-0000-0000-0000-000000000000'::uuid)\n"
                "          = coalesce(v_owner, '00000000-0000-0000-0000-000000000000'::uuid)\n"
                "    order by g.first_at desc\n",
                "    where g.kind = p_kind and g.gate_key = p_key\n    order by g.first_at desc\n",
            ),
        ),
        targeted=(
            "tests/integration/test_gates.py::test_keys_are_per_owner",
            "tests/integration/test_gates.py::test_an_application_user_gates_only_its_own_key",
        ),
    ),
    Mutant(
        "debounce-moves-a-started-job",
        "a debounce replaces the payload of its key's job after the job started",
        (
            Edit(
                function("job_gate"),
                "              and j.status = 'queued' and j.started_at is null;\n",
                "              and j.status <> 'dead';\n",
            ),
        ),
        targeted=(
            "tests/integration/test_gates.py::test_a_debounced_job_that_started_is_left_alone_and_the_next_enqueue_makes_a_new_one",
            "tests/model/test_gates_match_model.py",
        ),
    ),
    Mutant(
        "dead-without-outbox-event",
        "only a permanent failure writes its Job Dead event: a job dead of its last attempt or of a"
        " lease expired at its last attempt writes none",
        (
            Edit(
                TRIGGERS,
                "    when (new.status = 'dead' and old.status <> 'dead')\n",
                "    when (new.status = 'dead' and old.status <> 'dead'\n"
                "          and new.attempts < new.max_attempts)\n",
            ),
        ),
        targeted=(
            "tests/integration/test_outbox.py::test_every_path_to_dead_writes_exactly_one_job_dead_event",
            "tests/functions/test_outbox_delivery.py",
        ),
    ),
    Mutant(
        "refused-event-marked-published",
        "the publisher marks every event of a call published, those the bus refused too",
        (
            Edit(
                "queue_core/policies/outbox.py",
                "        accepted = [e.id for e, answer in zip(todo, answers, strict=True)"
                " if answer is None]\n",
                "        accepted = [e.id for e in todo]\n",
            ),
        ),
        targeted=(
            "tests/integration/test_outbox.py",
            "tests/functions/test_outbox_delivery.py",
        ),
    ),
    Mutant(
        "job-events-overtake",
        "a call carries several events of one job, so a refused event is overtaken by its job's"
        " next one",
        (
            Edit(
                "queue_core/policies/outbox.py",
                "        if event.order_key in seen:\n            continue\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_outbox.py::test_a_flaky_bus_delays_events_but_every_one_arrives_once_in_order_per_job",
        ),
    ),
    Mutant(
        "outbox-calls-unsized",
        "the publisher fills each PutEvents call with 10 events whatever their size, so a call"
        " over EventBridge's 256 KB is refused whole and stops the publisher for everyone",
        (
            Edit(
                "queue_core/policies/outbox.py",
                "        if picked and stored + event.stored > CALL_BYTES:\n            continue\n",
                "",
            ),
            Edit(
                "queue_core/policies/outbox.py",
                "        if total + size > CALL_BYTES:\n            continue\n",
                "",
            ),
        ),
        targeted=(
            "tests/functions/test_outbox_limits.py::test_events_of_60_kb_of_non_ascii_text_go_out_in_calls_under_256_kb",
        ),
    ),
    Mutant(
        "outbox-page-alone",
        "the publisher picks from the oldest page of pending events alone, so one tenant's"
        " backlog past a page holds every other tenant's events back",
        (
            Edit(
                "queue_core/policies/outbox.py",
                "        if len(page) < _PAGE:\n",
                "        if len(page) <= _PAGE:\n",
            ),
        ),
        targeted=(
            "tests/functions/test_outbox_limits.py::test_a_tenants_backlog_holds_another_tenants_event_back_one_call_at_most",
        ),
    ),
    Mutant(
        "operator-sees-step-results",
        "every view of a job's steps, the operator's too, carries each step's stored result",
        (
            Edit(
                function("job_durable"),
                "'size', s.size,\n                   'code_version', s.code_version)",
                "'size', s.size,\n"
                "                   'code_version', s.code_version, 'result', s.result)",
            ),
        ),
        targeted=(
            f"{OPERATOR_VIEW}::test_an_operator_reads_another_users_steps_wait_and_graph_and_no_payload",
        ),
    ),
    Mutant(
        "job-views-past-row-level-security",
        "the owner's view of a job's steps runs as the schema owner, past row-level security",
        (
            Edit(
                function("job_durable"),
                "    language sql stable\n",
                "    language sql stable security definer\n",
            ),
        ),
        targeted=(
            f"{OPERATOR_VIEW}::test_the_shared_views_keep_an_application_user_to_their_own_jobs",
        ),
    ),
    Mutant(
        "console-functions-for-applications",
        "the application role may call the operator console's functions",
        (
            Edit(
                function("operator_job"),
                "(uuid) to tickq_operator, tickq_worker;",
                "(uuid) to tickq_operator, tickq_worker, tickq_app;",
            ),
        ),
        targeted=(
            f"{OPERATOR_VIEW}::test_roles_other_than_the_operators_and_workers_may_not_call_the_operator_functions",
        ),
    ),
    Mutant(
        "operator-detail-through-the-owners-route",
        "the page opens a job of the every-user list through the owner's route",
        (
            Edit(
                "functions/static/app.js",
                'return state.scope === "all" ? `admin/${path}` : path;',
                "return path;",
            ),
        ),
        targeted=(
            "tests/browser/test_operator_job_view.py::test_the_operator_sees_another_users_steps_and_none_of_their_data",
        ),
    ),
    Mutant(
        "succeeded-jobs-keep-their-old-error",
        "tickq jobs shows a succeeded job's earlier failure as its error",
        (
            Edit(
                "queue_core/model/jobs.py",
                "        return None if self.status is Status.SUCCEEDED else self.error\n",
                "        return self.error\n",
            ),
        ),
        targeted=(
            "tests/integration/test_cli.py::test_jobs_shows_no_error_on_a_job_that_succeeded_after_failing",
        ),
    ),
    # Bounded fan-out.
    Mutant(
        "settle-unbounded",
        "the statement that finishes a parent settles all its children, whatever the budget",
        (
            Edit(
                function("jobs_settle"),
                "coalesce(nullif(current_setting('tickq.settle_budget', true), '')::integer, 1000)",
                "2147483646",
            ),
        ),
        targeted=(
            "tests/integration/test_fan_out.py::test_a_parents_success_releases_a_budget_of_children_and_later_transactions_the_rest",
        ),
    ),
    Mutant(
        "settlement-forgotten",
        "the children past the budget are never recorded, so never settled",
        (
            Edit(
                function("jobs_settle_run"),
                "    from unnest(v_work) w\n",
                "    from unnest(v_work) w where false\n",
            ),
        ),
        targeted=(
            "tests/integration/test_fan_out.py::test_a_parents_success_releases_a_budget_of_children_and_later_transactions_the_rest",
        ),
    ),
    Mutant(
        "settle-uncounted-edges",
        "a parent's success releases a child that did not count it (enqueued after it succeeded)",
        (
            Edit(
                function("jobs_settle_run"),
                "            where d.parent_id = v_item.parent_id and d.child_id = c.id"
                " and d.counted\n",
                "            where d.parent_id = v_item.parent_id and d.child_id = c.id\n",
            ),
        ),
        targeted=(
            "tests/integration/test_fan_out.py::test_a_child_enqueued_after_its_parent_succeeded_is_not_released_by_it_again",
        ),
    ),
    Mutant(
        "workflow-child-enqueued-again-on-resume",
        "a resumed map step does not look for the children it enqueued and enqueues again",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "        children = self._db().children(self.job.id, name)\n",
                "        children = []\n",
            ),
        ),
        targeted=(
            f"{WORKFLOWS}::test_map_returns_the_children_results_in_order_and_enqueues_them_once",
            f"{WORKFLOWS_E2E}::test_a_parent_maps_200_children_20_at_a_time_and_resumes_once_with_their_results",
        ),
    ),
    Mutant(
        "tick-stops-after-a-map-suspends",
        "a tick whose last batch was short stops after a map's parent suspends, leaving its"
        " children to the next tick",
        (
            Edit(
                "queue_core/runner/pipeline.py",
                "            if outcome.spawned or (job.has_children"
                " and outcome.status in TERMINAL):\n",
                "            if job.has_children and outcome.status in TERMINAL:\n",
            ),
        ),
        targeted=(
            "tests/functions/test_tick.py::test_a_fan_out_finishes_in_the_tick_that_started_it",
        ),
    ),
    Mutant(
        "workflow-undo-forward-order",
        "undos run in the order their steps completed instead of the reverse",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "        for name, undo, result in reversed(self.undos):\n",
                "        for name, undo, result in self.undos:\n",
            ),
        ),
        targeted=(
            f"{WORKFLOWS}::test_undos_run_in_reverse_order_once_each_though_the_worker_dies_during_one",
            f"{WORKFLOWS_E2E}::test_a_saga_undoes_its_completed_steps_in_reverse_once_each_across_a_sigkill",
        ),
    ),
    Mutant(
        "workflow-undo-twice-after-crash",
        "a compensation resumed after a crash runs again the undos it had already recorded",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "            if state.undone(name):\n                continue\n",
                "",
            ),
        ),
        targeted=(
            f"{WORKFLOWS}::test_undos_run_in_reverse_order_once_each_though_the_worker_dies_during_one",
            f"{WORKFLOWS_E2E}::test_a_saga_undoes_its_completed_steps_in_reverse_once_each_across_a_sigkill",
        ),
    ),
    Mutant(
        "cancel-saga-at-rest-not-compensated",
        "the cancel of a suspended or retrying saga (the API's, the CLI's, the operator's: one"
        " body, tickq.jobs_cancel) ends it without its undos",
        (
            Edit(
                function("jobs_cancel"),
                "                    then tickq.job_compensation_spare(j.id) else 0 end as spare\n",
                "                    then 0 else 0 end as spare\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_cancelled_while_it_does_not_run_runs_its_undos_then_ends_cancelled",
            f"{SAGA_PATHS}::test_the_cli_cancel_of_a_suspended_saga_says_it_compensates",
            f"{SAGA_PATHS}::test_a_saga_waiting_on_its_children_cancelled_by_the_operator_cancels_them_and_compensates",
        ),
    ),
    Mutant(
        "reclaim-last-attempt-not-compensated",
        "the reclaim ends a saga dead on its last attempt without its undos (a cancel's still run)",
        (
            Edit(
                QUERIES,
                "           case when j.cancel_requested or j.attempts >= j.max_attempts\n"
                "                then tickq.job_compensation_spare(j.id) else 0 end as spare\n",
                "           case when j.cancel_requested\n"
                "                then tickq.job_compensation_spare(j.id) else 0 end as spare\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
        ),
    ),
    Mutant(
        "reclaim-compensation-runs-uncounted",
        "the reclaim that begins a saga's compensation keeps no count of its attempts then: its"
        " compensation's runs show as attempts past the max_attempts declared",
        (
            Edit(
                "queue_core/postgres/leases.sql",
                "case when d.spare > 0 then j.attempts end),\n",
                "null::integer),\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
        ),
    ),
    Mutant(
        "job-view-shows-raised-max-attempts",
        "the job's views show the max_attempts a saga's compensation raised, not the one declared",
        (
            Edit(
                "queue_core/model/jobs.py",
                '            "max_attempts": self.shown_max_attempts,\n',
                '            "max_attempts": self.max_attempts,\n',
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
            f"{SIGNAL_API}::"
            "test_the_job_view_shows_the_declared_max_attempts_and_the_compensations_runs_apart",
        ),
    ),
    Mutant(
        "retry-keeps-raised-max-attempts",
        "a retried saga that compensated keeps the max_attempts its compensation raised: its"
        " fresh attempts run past the max_attempts declared",
        (
            Edit(
                function("jobs_retry"),
                "            max_attempts = coalesce(j.declared_max_attempts, j.max_attempts),\n"
                "            declared_max_attempts = null,\n",
                "",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
        ),
    ),
    Mutant(
        "cancelled-parent-takes-saga-children-uncompensated",
        "the saga children of a parent that ended cancelled are cancelled without their undos",
        (
            Edit(
                function("job_children_cancel"),
                "                    then tickq.job_compensation_spare(c.id) else 0 end as spare\n",
                "                    then 0 else 0 end as spare\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_the_saga_children_of_a_cancelled_parent_compensate_before_they_end_cancelled",
        ),
    ),
    Mutant(
        "compensation-begun-twice",
        "a cancel of a saga compensating already records a second compensation",
        (
            Edit(
                function("job_compensation_spare"),
                "    select case when exists (select from tickq.job_step_tries t\n",
                "    select case when false and exists (select from tickq.job_step_tries t\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_compensating_already_is_not_compensated_again_by_a_cancel",
        ),
    ),
    Mutant(
        "reclaim-compensation-without-spare-attempts",
        "the reclaim sends a saga back to compensate without the attempts its undos need",
        (
            Edit(
                QUERIES,
                "        max_attempts = case when d.spare > 0 then greatest(",
                "        max_attempts = case when false then greatest(",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
        ),
    ),
    Mutant(
        "compensating-replay-runs-past-its-steps",
        "a handler replayed to compensate runs on past its stored steps (what killed its worker)",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "            if self.names.issuperset(self.state.steps):\n",
                "            if False:\n",
            ),
        ),
        targeted=(
            f"{SAGA_PATHS}::test_a_saga_whose_worker_dies_on_its_last_attempt_compensates_then_ends_dead",
        ),
    ),
    Mutant(
        "workflow-step-retry-spends-an-attempt",
        "a step's failed try goes to the job's own retry (an attempt spent) instead of suspending",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "        delay = retry.delay(tries)\n",
                "        delay = None  # every failed try goes on to the job\n",
            ),
        ),
        targeted=(
            f"{WORKFLOWS}::test_a_step_retries_alone_and_spends_a_job_attempt_only_when_its_tries_run_out",
            f"{WORKFLOWS_E2E}::test_a_step_that_fails_twice_then_succeeds_retries_alone_and_spends_one_attempt",
        ),
    ),
    Mutant(
        "workflow-release-one-child-too-many",
        "a child's end releases one waiting sibling more than its step's bound allows",
        (
            Edit(
                function("job_children_settle"),
                "            and k.idx < x.max_running + x.siblings - x.left_after\n",
                "            and k.idx <= x.max_running + x.siblings - x.left_after\n",
            ),
        ),
        targeted=(
            f"{WORKFLOWS_E2E}::test_a_parent_maps_200_children_20_at_a_time_and_resumes_once_with_their_results",
        ),
    ),
    Mutant(
        "completion-in-its-own-transaction",
        "a transactional handler's writes commit before, not with, the job's fenced success",
        (
            Edit(
                TRANSACTIONAL,
                "                result = fn(job, conn)\n                done = job.completed",
                "                result = fn(job, conn)\n"
                "            with self.transaction() as conn:\n"
                "                done = job.completed",
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_handler_whose_lease_was_taken_over_cannot_commit_its_row",
        ),
    ),
    Mutant(
        "claim-recovery-ignores-the-seed",
        "after a lost claim reply, the worker takes every running job, not only its seed's",
        (
            Edit(
                QUERIES,
                "  and j.lease_token = tickq.lease_token(s.seed, j.id)\n",
                "  and j.lease_token is not null\n",
            ),
        ),
        targeted=(
            f"{VARIANTS}::test_a_seed_does_not_find_a_job_leased_again_since",
            f"{VARIANTS}::test_a_claims_seed_finds_its_jobs_again_on_their_first_attempt",
        ),
    ),
    Mutant(
        "claim-recovery-spends-an-attempt",
        "the jobs of a claim whose reply was lost are taken again as a new attempt",
        (
            Edit(
                QUERIES,
                "    updated_at = clock.now\nfrom clock, (select",
                "    updated_at = clock.now, attempts = j.attempts + 1\nfrom clock, (select",
            ),
        ),
        targeted=(
            f"{CLAIM_REPLY_LOST}::test_jobs_of_a_claim_whose_reply_was_lost_run_at_once_on_their_first_attempt",
            f"{VARIANTS}::test_a_claims_seed_finds_its_jobs_again_on_their_first_attempt",
        ),
    ),
    Mutant(
        "lost-claim-seed-forgotten",
        "a failed claim statement's seed is not kept: its jobs wait out their lease",
        (
            Edit(
                "queue_core/runner/pipeline.py",
                "        if seed is not None:\n            self.lost_claims.append(seed)\n",
                "",
            ),
        ),
        targeted=(
            f"{CLAIM_REPLY_LOST}::test_jobs_of_a_claim_whose_reply_was_lost_run_at_once_on_their_first_attempt",
            f"{CLAIM_REPLY_LOST}::test_jobs_of_a_finish_and_claim_whose_reply_was_lost_run_at_once_too",
        ),
    ),
    Mutant(
        "detail-map-progress-dropped",
        "the job detail says nothing of a map step's children until they have all ended",
        (
            Edit(
                "functions/static/app.js",
                "  for (const map of job.maps || []) notes.push(",
                "  for (const map of []) notes.push(",
            ),
        ),
        targeted=(
            "tests/browser/test_operator_workflow_view.py::test_the_operator_sees_how_far_a_waiting_parents_children_are",
        ),
    ),
    Mutant(
        "detail-graph-drops-spawned-children",
        "the job detail's graph leaves out the children a workflow spawned",
        (
            Edit(
                "functions/static/app.js",
                "...(job.children || []), ...(job.spawned || [])",
                "...(job.children || [])",
            ),
        ),
        targeted=(
            "tests/browser/test_operator_workflow_view.py::test_the_operator_sees_a_map_step_and_opens_its_children_without_their_data",
        ),
    ),
    Mutant(
        "partition-attach-ignores-finishes-in-flight",
        "maintenance attaches a day's partition without waiting for the finishes in flight,"
        " so one that chose the default partition before fails its check after",
        (
            Edit(
                function("jobs_partitions_ensure"),
                "                lock table only tickq.jobs_done in share mode;\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_partitions.py::test_a_finish_that_waited_out_its_days_attach_lands_in_the_new_partition",
        ),
    ),
    Mutant(
        "refused-handler-connection-fails-the-job",
        "a transactional handler whose connection was refused until its lease ran out fails"
        " its job, early, for an error its handler never met",
        (
            Edit(
                TRANSACTIONAL,
                "                if not _time_before(until):\n"
                "                    raise HandlerConnectionLost(str(exc)) from exc\n",
                "                if not _time_before(until):\n                    raise\n",
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_handler_whose_connection_is_refused_for_its_whole_lease_leaves_its_job_to_the_reclaim",
        ),
    ),
    Mutant(
        "lost-handler-connection-fails-the-job",
        "a transactional handler whose connection died in its transaction (which may have"
        " committed) fails its job early instead of leaving it to the reclaim",
        (
            Edit(
                TRANSACTIONAL,
                "            if held and held[0].broken:\n",
                "            if False:\n",
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_handler_whose_connection_is_lost_in_its_transaction_leaves_its_job_to_the_reclaim",
        ),
    ),
    Mutant(
        "transactional-saga-not-compensated",
        "a transactional handler that fails for good ends dead without the undos its stored"
        " steps owe",
        (
            Edit(
                RUNNER,
                "            return with_event(task, job,"
                " self._settle(context, self._judge(job, exc)))\n"
                "        if log.isEnabledFor(logging.INFO):\n"
                '            log.info("job succeeded in its handler\'s transaction"',
                "            return with_event(task, job, self._judge(job, exc))\n"
                "        if log.isEnabledFor(logging.INFO):\n"
                '            log.info("job succeeded in its handler\'s transaction"',
            ),
        ),
        targeted=(
            f"{TRANSACTIONAL_TESTS}::test_a_transactional_saga_that_fails_for_good_runs_its_undos_before_it_ends_dead",
        ),
    ),
    Mutant(
        "map-children-bypass-queue-depth",
        "a map step's children are enqueued past their queue's maximum depth",
        (
            Edit(
                "queue_core/runner/durable_context.py",
                "                queue=self.job.queue,\n",
                "                queue=None,\n",
            ),
        ),
        targeted=(
            f"{WORKFLOWS}::test_a_map_that_would_overflow_its_queue_waits_for_room_without_spending_an_attempt",
        ),
    ),
    Mutant(
        "refused-outcome-fails-the-batch",
        "an outcome the database refuses fails the whole batch's statement and the tick",
        (
            Edit(
                RUNNER,
                "            held, outcomes = self.persist_apart(jobs, outcomes, refused)\n",
                "            raise refused\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner_isolation.py::"
            "test_a_refused_outcome_fails_its_job_and_nothing_else[one-statement]",
        ),
    ),
    Mutant(
        "refused-overlapped-outcome-fails-the-batch",
        "an outcome refused in the overlapped statement fails both batches and the tick",
        (
            Edit(
                RUNNER,
                "            held, stored = self.persist_apart(*unsaved, refused)\n",
                "                    raise refused\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner_isolation.py::"
            "test_a_refused_outcome_fails_its_job_and_nothing_else[overlapped]",
        ),
    ),
    Mutant(
        "app-executes-job-gate",
        "the application role may execute tickq.job_gate, naming any owner and clock",
        (
            Edit(
                function("job_gate"),
                "jsonb, timestamptz, uuid) to tickq_worker;",
                "jsonb, timestamptz, uuid) to tickq_app, tickq_worker;",
            ),
        ),
        targeted=(
            "tests/security/test_app_gate_surface.py::"
            "test_the_application_may_not_name_another_owner_to_the_gate",
        ),
    ),
    Mutant(
        "ended-jobs-leases-run-down",
        "a job whose handler ended waits for its batch-mates, its lease running down",
        (
            Edit(
                "queue_core/runner/runner.py",
                "            if not async_:\n"
                "                self._keep_ended_leased(jobs, futures)\n",
                "            if not async_:\n                pass\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner_ended_leases.py::"
            "test_a_quick_job_beside_a_slow_one_is_saved_at_once_and_never_run_twice[batch]",
        ),
    ),
    Mutant(
        "sql-enqueue-ignores-the-catalogue",
        "a SQL enqueue takes the table's defaults, not the task's published settings",
        (
            Edit(
                "queue_core/schema/functions/enqueue_job.sql",
                "    if v_defaults is not null then\n        p_job := v_defaults ||",
                "    if false then\n        p_job := v_defaults ||",
            ),
        ),
        targeted=(
            "tests/integration/test_task_catalog.py::"
            "test_sql_enqueue_gets_the_tasks_settings_as_a_worker_and_as_an_application",
        ),
    ),
    Mutant(
        "python-enqueue-ignores-the-catalogue",
        "a Python enqueue without the handler's module takes the library's defaults",
        (
            Edit(
                "queue_core/runner/registry.py",
                "        elif catalog and isinstance(type, str) and type in catalog:\n",
                "        elif False:\n",
            ),
        ),
        targeted=(
            "tests/integration/test_task_catalog.py::test_python_without_the_module_gets_the_tasks_settings",
        ),
    ),
    Mutant(
        "ended-jobs-saved-with-their-batch",
        "an ended job's outcome waits for its slowest batch-mate (its lease is kept alive)",
        (
            Edit(
                "queue_core/runner/runner.py",
                "        saving = True\n",
                "        saving = False\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner_ended_leases.py::"
            "test_a_quick_job_beside_a_slow_one_is_saved_at_once_and_never_run_twice[streaming]",
        ),
    ),
    Mutant(
        "job-ids-not-taken",
        "an inserted job's id is not taken in tickq.job_ids: a new job may share another's id",
        (
            Edit(
                "queue_core/schema/functions/job_ids_take.sql",
                "    insert into tickq.job_ids (id) select a.id from arrived a;\n",
                "    perform 1;\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::"
            "test_no_role_can_insert_a_job_with_an_id_another_job_holds",
        ),
    ),
    Mutant(
        "app-writes-settlements",
        "the application role may write settlements, cancelling or releasing any child early",
        (
            Edit(
                "queue_core/schema/policies.sql",
                "grant select on tickq.job_settlements to tickq_app;",
                "grant select, insert, update, delete on tickq.job_settlements to tickq_app;",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::"
            "test_the_application_login_writes_no_table_and_names_no_owner_or_clock",
        ),
    ),
    Mutant(
        "settlements-by-root-first",
        "settlements are worked off by root, not by age: a flood of later ones starves the rest",
        (
            Edit(
                "queue_core/schema/functions/jobs_settle_pending.sql",
                "order by s.created_at, s.status <> 'succeeded', s.root_id, s.parent_id",
                "order by s.status <> 'succeeded', s.root_id, s.parent_id",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::"
            "test_settlements_are_worked_off_oldest_first_whatever_comes_later",
        ),
    ),
    Mutant(
        "gate-turn-on-advisory-lock",
        "a gate key's turn is an advisory lock, which any login may take and hold",
        (
            Edit(
                "queue_core/schema/functions/job_gate.sql",
                "    insert into tickq.job_gate_turns (kind, gate_key, owner)\n",
                "    perform pg_advisory_xact_lock(hashtextextended(\n"
                "        p_kind || '/' || coalesce(v_owner::text, '') || '/' || p_key, 0));\n"
                "    insert into tickq.job_gate_turns (kind, gate_key, owner)\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::"
            "test_holding_the_old_advisory_lock_does_not_stop_a_gated_enqueue",
        ),
    ),
    Mutant(
        "publish-takes-tickq-sources",
        "an application may publish under a source that begins with tickq",
        (
            Edit(
                "queue_core/schema/functions/publish.sql",
                "    if lower(publish.source) like 'tickq%'"
                " and publish.source <> 'tickq.app' then\n",
                "    if false then\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::test_an_event_source_is_plain_ascii_and_never_tickqs",
        ),
    ),
    Mutant(
        "enqueue-lease-unbounded",
        "the application's enqueue takes any lease_seconds (the table's check still bounds it)",
        (
            Edit(
                "queue_core/schema/functions/enqueue_job.sql",
                "    v_lease := tickq.request_number(p_job, 'lease_seconds', 1,\n"
                "                                    (b ->> 'max_lease_seconds')::float8,"
                " true, v_where);\n",
                "    v_lease := tickq.request_number(p_job, 'lease_seconds', 1,\n"
                "                                    1e9, true, v_where);\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_write_surface.py::"
            "test_a_bad_request_is_refused_naming_its_field_and_writes_nothing",
        ),
    ),
    Mutant(
        "app-functions-without-user",
        "the application login's functions let a login that names no user through",
        (
            Edit(
                "queue_core/schema/functions/app_user.sql",
                "    if v_user is null then\n",
                "    if false then\n",
            ),
        ),
        targeted=(
            "tests/security/test_app_gate_surface.py::"
            "test_the_application_gate_refuses_without_a_user",
            "tests/security/test_app_write_surface.py::"
            "test_every_function_refuses_a_login_that_names_no_user",
        ),
    ),
    Mutant(
        "gate-rows-without-jobs",
        "a gate row may name no job, or another owner's job",
        (
            Edit(
                "queue_core/schema/functions/job_gates_have_jobs.sql",
                "                     and j.user_id is not distinct from new.user_id) then",
                "                     and j.user_id is not distinct from new.user_id) and false"
                " then",
            ),
        ),
        targeted=(
            "tests/security/test_app_gate_surface.py::"
            "test_a_gate_row_cannot_be_planted_on_another_owners_job",
        ),
    ),
    # The column bounds of tickq.jobs (queue_core/bounds.py), each dropped from the
    # current-state schema a test database is built from: rows the engine cannot read or run
    # get in. The fuzz (tests/integration/test_row_fuzz.py) shows the queue stopping on the
    # first three; the bounds' own test shows each value let in.
    Mutant(
        "jobs-backoff-unbounded",
        "a job's backoff policy is not bounded by the table: a retry time past any interval"
        " stops every reclaim",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    constraint jobs_backoff_check check (\n"
                "        backoff_base > 0 and backoff_base <= 86400\n"
                "        and backoff_factor >= 1 and backoff_factor <= 100\n"
                "        and backoff_max >= backoff_base and backoff_max <= 604800\n"
                "        and backoff_jitter between 0 and 1),\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::test_no_row_can_stop_the_queue",
            "tests/integration/test_column_bounds.py::test_the_owner_is_held_to_every_bound",
        ),
    ),
    Mutant(
        "jobs-lease-seconds-unbounded",
        "a job's own lease is not bounded by the table: a lease of 2^31 - 1 seconds holds a"
        " running slot for 68 years",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    constraint jobs_lease_seconds_check check (\n"
                "        lease_seconds is null or lease_seconds between 1 and 43200),\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::test_no_row_can_stop_the_queue",
            "tests/integration/test_column_bounds.py::test_the_owner_is_held_to_every_bound",
        ),
    ),
    Mutant(
        "jobs-times-unbounded",
        "a job's times are not bounded by the table: `-infinity` or year 0 breaks the claim"
        " and every listing",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    constraint jobs_times_check check (\n"
                "        run_after between '0001-01-02 00:00:00+00' and '9999-12-30 00:00:00+00'\n"
                "        and lease_until between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'\n"
                "        and created_at between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'\n"
                "        and updated_at between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'\n"
                "        and started_at between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'\n"
                "        and finished_at between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'\n"
                "        and wait_until between '0001-01-02 00:00:00+00' and"
                " '9999-12-30 00:00:00+00'),\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::test_no_row_can_stop_the_queue",
            "tests/integration/test_column_bounds.py::test_the_owner_is_held_to_every_bound",
        ),
    ),
    Mutant(
        "jobs-payload-unbounded",
        "a job's payload is not bounded in size by the table: any role's plain SQL can hand"
        " every worker that claims it a payload of any size",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    constraint jobs_payload_size_check check (\n"
                "        pg_column_size(case when pg_column_compression(payload) is null"
                " then payload\n"
                "                            else payload #> '{}' end) <= 2097152),\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_column_bounds.py::test_the_owner_is_held_to_every_bound",
            "tests/integration/test_column_bounds.py::"
            "test_a_value_that_compresses_well_is_measured_as_it_is[worker]",
        ),
    ),
    Mutant(
        "claim-counts-past-max-attempts",
        "a claim counts an attempt past max_attempts on a job whose attempts are used up, which"
        " jobs_attempts_check refuses: one such row fails the claim of every job beside it",
        (
            Edit(
                LEASE,
                "        attempts = least(j.attempts + 1, j.max_attempts),\n",
                "        attempts = j.attempts + 1,\n",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::"
            "test_a_queued_job_with_its_attempts_used_up_does_not_stop_the_claim",
        ),
    ),
    Mutant(
        "error-history-past-its-bound",
        "the error history drops no entry to make room for a new one: a history at"
        " jobs_errors_check's bound fails the reclaim (or finish) of every job beside it",
        (
            Edit(
                function("error_history"),
                "    while pg_column_size(v_kept) > 1048576 loop\n"
                "        v_kept := v_kept - 0;\n"
                "    end loop;\n",
                "",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::"
            "test_an_error_history_at_its_bound_does_not_stop_the_reclaim",
        ),
    ),
    Mutant(
        "jobs-json-nesting-unbounded",
        "a job's JSON is not bounded in nesting by the table: plain SQL can write a payload"
        " nested deeper than a worker's json module reads, and every claim that reads it fails",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    constraint jobs_json_depth_check check (\n",
                "    constraint jobs_json_depth_check check (true or\n",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::"
            "test_a_payload_nested_past_the_bound_is_refused_and_one_at_it_runs",
            "tests/integration/test_column_bounds.py::test_the_owner_is_held_to_every_bound",
        ),
    ),
    Mutant(
        "api-json-nesting-unbounded",
        "the API's validation lets JSON nested past the tables' bound through: the enqueue"
        " fails in the database instead of saying what is wrong",
        (
            Edit(
                "queue_core/model/json_text.py",
                "> MAX_JSON_DEPTH and _too_deep(value):",
                "> MAX_JSON_DEPTH and False:",
            ),
        ),
        targeted=(
            "tests/integration/test_column_bounds.py::"
            "test_the_api_refuses_what_the_depth_checks_refuse",
        ),
    ),
    Mutant(
        "long-json-integer-unread",
        "a JSON integer of more digits than Python reads from text fails the read of every"
        " row beside it (the claim, the reclaim, a listing) instead of coming back as a Decimal",
        (
            Edit(
                "queue_core/postgres/executor.py",
                "        return json.loads(text, parse_int=_long_int)\n",
                "        raise\n",
            ),
        ),
        targeted=(
            "tests/integration/test_row_fuzz.py::"
            "test_a_payload_with_a_long_number_does_not_stop_the_claim",
        ),
    ),
    Mutant(
        "snooze-raises-max-attempts",
        "a snooze gives its attempt back by raising max_attempts again instead of taking it off"
        " attempts: a job that never failed ends 2/5 for a declared 4",
        (
            Edit(
                QUERIES,
                "        attempts = j.attempts - case when o.extra_attempt then 1 else 0 end,\n",
                "        max_attempts = j.max_attempts + case when o.extra_attempt then 1 else 0"
                " end,\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner.py::"
            "test_a_snoozed_job_that_never_failed_ends_with_its_declared_attempts",
        ),
    ),
    Mutant(
        "resumes-count-the-suspension-still-waited-on",
        "the views count a suspension as a resumption before the job is back: a job waiting"
        " for its first signal shows resumed 1x",
        (
            Edit(
                "queue_core/postgres/steps.py",
                "    resumed = max((resumes or 0) - (1 if waiting else 0), 0)\n",
                "    resumed = resumes or 0\n",
            ),
        ),
        targeted=(
            "tests/integration/test_steps.py::"
            "test_suspend_gives_the_attempt_back_and_keeps_the_steps",
            OPERATOR_VIEW,
        ),
    ),
    Mutant(
        "async-handler-runs-past-its-timeout",
        "an async handler is awaited to its end whatever its timeout: a hung one holds its"
        " slot and the next job waits",
        (
            Edit(
                RUNNER,
                "result = await _within(task.fn(context), timeout)",
                "result = await task.fn(context)",
            ),
        ),
        targeted=(
            f"{TIMEOUT_TESTS}::"
            "test_an_async_handler_is_cancelled_at_its_timeout_and_the_next_job_runs",
        ),
    ),
    Mutant(
        "isolated-handler-not-killed-at-its-timeout",
        "a process-isolated handler's child is waited for to its end: its code after the"
        " timeout runs, and its late result is stored",
        (
            Edit(
                "queue_core/runner/timeouts.py",
                "if not receiver.poll(timeout):",
                "if not receiver.poll(None):",
            ),
        ),
        targeted=(f"{TIMEOUT_TESTS}::test_a_process_isolated_handler_is_killed_at_its_timeout",),
    ),
    Mutant(
        "thread-handler-late-outcome-stored",
        "the runner waits for a plain handler past its timeout and stores its late return",
        (Edit(RUNNER, "if call.done.is_set():", "if call.done.wait():"),),
        targeted=(f"{TIMEOUT_TESTS}::test_a_plain_handlers_late_outcome_is_never_stored",),
    ),
    Mutant(
        "thread-handler-writes-after-its-timeout",
        "an abandoned handler's context still writes: its progress goes to a job whose"
        " attempt has ended, until the failure's finish fences it",
        (
            Edit(
                RUNNER,
                "        context.timed_out(timeout)\n        self.abandoned.add(call.thread)",
                "        self.abandoned.add(call.thread)",
            ),
        ),
        targeted=(f"{TIMEOUT_TESTS}::test_a_plain_handlers_late_outcome_is_never_stored",),
    ),
    Mutant(
        "patched-always-true",
        "job.patched answers True on the replay of a history begun under older code, so an"
        " old job runs the new branch its history never took",
        (
            Edit(
                STEP_CONTEXT,
                "        if not steps.replaying(state, self.names):\n",
                "        if True:\n",
            ),
        ),
        targeted=(
            f"{CODE_VERSIONS}::test_patched_is_false_for_a_run_begun_under_older_code_and_true"
            "_for_a_new_one",
            f"{DEPLOYS_E2E}::test_the_check_names_an_unsafe_version_and_passes_a_patched_one"
            "_that_then_runs",
        ),
    ),
    Mutant(
        "replay-patched-always-true",
        "the deploy check's job.patched answers True on every history, so it names a patched"
        " change as breaking the jobs it is safe for",
        (
            Edit(
                REPLAY,
                "            self.lacking.add(name)\n            return False\n",
                "            return True\n",
            ),
        ),
        targeted=(
            f"{CODE_VERSIONS}::test_the_deploy_check_passes_a_patched_change_without_running"
            "_a_step",
        ),
    ),
    Mutant(
        "deploy-check-ignores-renamed-step",
        "the deploy check takes a step its history lacks for the history's end, so a renamed"
        " step passes the check",
        (
            Edit(
                REPLAY,
                "        pending = self.pending()\n        self.names.add(name)\n",
                "        pending: list[str] = []\n        self.names.add(name)\n",
            ),
        ),
        targeted=(
            f"{CODE_VERSIONS}::test_the_deploy_check_names_a_job_whose_new_code_asks_for_another"
            "_step",
            f"{DEPLOYS_E2E}::test_the_check_names_an_unsafe_version_and_passes_a_patched_one"
            "_that_then_runs",
        ),
    ),
    Mutant(
        "pinned-claim-ignores-version",
        "a pinned worker claims jobs last run under another code version",
        (
            Edit(
                QUERIES,
                "      and (code_version is null or code_version = %(code_version)s::text)\n",
                "",
            ),
        ),
        targeted=(
            f"{CODE_VERSIONS}::test_a_pinned_store_claims_only_jobs_not_yet_run_or_last_run"
            "_under_its_version",
            f"{DEPLOYS_E2E}::test_pinned_workers_of_two_versions_each_drain_their_own_jobs",
        ),
    ),
    Mutant(
        "replay-runs-step-function",
        "the deploy check's replay calls a step's function (a side effect on every check)",
        (
            Edit(
                REPLAY,
                "    ) -> Any:\n        return self._ask(name)\n\n    async def step_async(",
                "    ) -> Any:\n        fn()\n        return self._ask(name)\n\n"
                "    async def step_async(",
            ),
        ),
        targeted=(
            f"{CODE_VERSIONS}::test_the_deploy_check_names_a_job_whose_new_code_asks_for_another"
            "_step",
        ),
    ),
    # A signal wakes only a job waiting for a signal of that name, and says whether it woke
    # one, through every way it is sent (the store, the CLI, the application's store and
    # tickq.signal in SQL; the HTTP API).
    Mutant(
        "signal-wakes-any-signal-waiter",
        "a signal wakes a job that waits for a signal of another name",
        (
            Edit(
                function("job_signals_send"),
                "            run_after = case when j.status in ('queued', 'retrying')"
                " and j.wait_kind = 'signal'\n"
                "                                  and j.wait_name = p_name\n",
                "            run_after = case when j.status in ('queued', 'retrying')"
                " and j.wait_kind = 'signal'\n",
            ),
        ),
        targeted=(SIGNAL_WAKES, SIGNAL_API),
    ),
    Mutant(
        "signal-wakes-a-sleeper-of-that-name",
        "a signal wakes a job that sleeps (a timer) under the signal's name",
        (
            Edit(
                function("job_signals_send"),
                "            run_after = case when j.status in ('queued', 'retrying')"
                " and j.wait_kind = 'signal'\n",
                "            run_after = case when j.status in ('queued', 'retrying')\n",
            ),
        ),
        targeted=(SIGNAL_WAKES,),
    ),
    Mutant(
        "app-signal-reports-kept-as-woke",
        "tickq.signal says it woke the job whenever it kept the signal",
        (Edit(function("signal"), "    return v_sent.woke;\n", "    return v_sent.kept;\n"),),
        targeted=(SIGNAL_WAKES, SIGNAL_API),
    ),
    Mutant(
        "store-signal-reports-kept-as-woke",
        "the store's signal (and so the CLI's) says it woke the job whenever it kept the signal",
        (
            Edit(
                "queue_core/postgres/steps.py",
                "        return bool(woke)\n",
                "        return kept\n",
            ),
        ),
        targeted=(SIGNAL_WAKES,),
    ),
    Mutant(
        "app-writes-its-jobs-signals",
        "the application login may delete and change the signals of its own live jobs",
        (
            Edit(
                "queue_core/schema/policies.sql",
                "grant select on tickq.job_steps, tickq.job_signals to tickq_app;\n",
                "grant select on tickq.job_steps to tickq_app;\n"
                "grant select, update, delete on tickq.job_signals to tickq_app;\n",
            ),
            Edit(
                "queue_core/schema/policies.sql",
                "create policy job_signals_owner on tickq.job_signals for select to tickq_app\n",
                "create policy job_signals_owner on tickq.job_signals to tickq_app\n",
            ),
        ),
        targeted=(
            "tests/security/test_steps_security.py"
            "::test_app_cannot_delete_or_change_a_live_jobs_signals",
        ),
    ),
    # A per-group cap of a type counts the group's running jobs of that type in every queue;
    # a paused queue is left out of every claim variant.
    Mutant(
        "group-cap-counts-one-queue",
        "a per-group cap of a type counts only the running jobs of the queue being claimed",
        (
            Edit(
                function("claim_fair"),
                "                       where g.status = 'running' and g.type = r.type\n",
                "                       where g.status = 'running' and g.type = r.type\n"
                "                         and g.queue = p_queue\n",
            ),
        ),
        targeted=(
            f"{VARIANTS}::test_a_per_group_cap_of_a_type_counts_its_running_jobs_in_every_queue",
        ),
    ),
    Mutant(
        "pause-after-the-fair-choice",
        "the fair claim (queues whose jobs span several groups) is chosen before paused"
        " queues are left out, so it claims from them",
        (
            Edit(
                CLAIM,
                PAUSE_FILTER + PINNED_CHOICE + FAIR_CHOICE,
                PINNED_CHOICE + FAIR_CHOICE + PAUSE_FILTER,
            ),
        ),
        targeted=(f"{VARIANTS}::test_a_paused_queue_is_left_out_of_every_claim_variant",),
    ),
    Mutant(
        "pause-after-the-claim-choice",
        "the fair and limited claims are chosen before paused queues are left out, so they"
        " claim from them",
        (
            Edit(CLAIM, PAUSE_FILTER, ""),
            Edit(CLAIM, PLAIN_CHOICE, PAUSE_FILTER + PLAIN_CHOICE),
        ),
        targeted=(f"{VARIANTS}::test_a_paused_queue_is_left_out_of_every_claim_variant",),
    ),
    # A cron occurrence is advanced in the transaction that enqueues its job.
    Mutant(
        "schedule-advanced-after-its-transaction",
        "a scheduler run commits the occurrence's job, then advances the schedule past it in a"
        " transaction of its own: a run stopped between the two leaves the occurrence due",
        (
            Edit(
                "queue_core/policies/schedules.py",
                "                report.skipped += 1\n"
                '            params = {"name": name, "fired": firing.fire,'
                ' "next_at": firing.next_at, "now": now}\n'
                '            self._db.dicts("schedules_advance", params)\n',
                "                report.skipped += 1\n"
                '        params = {"name": name, "fired": firing.fire,'
                ' "next_at": firing.next_at, "now": now}\n'
                '        self._db.dicts("schedules_advance", params)\n',
            ),
        ),
        targeted=(
            "tests/integration/test_schedules.py"
            "::test_an_occurrence_is_advanced_in_the_transaction_that_enqueues_its_job",
        ),
    ),
    # The claim order and the runnable condition, written once in queries.sql's parts, held
    # in every other claim variant: one variant changed alone.
    Mutant(
        "fair-group-pick-ignores-owner-priority",
        "the fair claim picks a group's jobs by age alone, not by their owner's priority first",
        (
            Edit(
                function("claim_fair"),
                "order by j.owner_priority desc, j.run_after, j.created_at\n"
                "                        limit v_share\n",
                "order by j.run_after, j.created_at\n                        limit v_share\n",
            ),
        ),
        targeted=(CLAIM_ORDER,),
    ),
    Mutant(
        "limited-claim-of-queues-takes-jobs-early",
        "the limited claim of several queues takes jobs before their run_after",
        (
            Edit(
                function("claim_limited"),
                "and queue = any(p_queues)\n"
                "                    and run_after <= v_now and type <> all(v_blocked)\n",
                "and queue = any(p_queues)\n                    and type <> all(v_blocked)\n",
            ),
        ),
        targeted=(CLAIM_ORDER,),
    ),
    Mutant(
        "plain-claim-order-changed-alone",
        "the plain claims take the longest-waiting first before the owner's own priority,"
        " the other variants do not",
        (
            Edit(
                QUERIES,
                "    order by priority desc, owner_priority desc, run_after, created_at\n"
                "    limit (select %(limit)s::int)\n",
                "    order by priority desc, run_after, owner_priority desc, created_at\n"
                "    limit (select %(limit)s::int)\n",
            ),
        ),
        targeted=(CLAIM_ORDER,),
    ),
    Mutant(
        "claim-limit-seen-by-planner",
        "the plain claims give the planner their limit: every execution's own plan looks"
        " cheaper than the generic one, and each statement is planned again",
        (
            Edit(
                QUERIES,
                "    limit (select %(limit)s::int)\n",
                "    limit %(limit)s\n",
            ),
        ),
        targeted=("tests/integration/test_claim_plan_cache.py",),
    ),
    Mutant(
        "claim-index-order-changed-alone",
        "jobs_claim_idx holds a queue's jobs by age before the owner's priority: the claim"
        " sorts instead of walking it",
        (
            Edit(
                "queue_core/schema/tables.sql",
                "    (queue, priority desc, owner_priority desc, run_after, created_at)\n",
                "    (queue, priority desc, run_after, owner_priority desc, created_at)\n",
            ),
        ),
        targeted=(CLAIM_ORDER,),
    ),
    Mutant(
        "python-claim-order-without-owner-priority",
        "a claimed batch is re-sorted in Python without the owner's own priority",
        (
            Edit(
                TRANSITIONS,
                "    return (-job.priority, -job.owner_priority, job.run_after, job.created_at)\n",
                "    return (-job.priority, 0, job.run_after, job.created_at)\n",
            ),
        ),
        targeted=(CLAIM_ORDER,),
    ),
    # One list of the tables that hang on a job, held across the ways a job goes.
    Mutant(
        "partition-drop-keeps-signals",
        "a dropped day partition leaves its jobs' signals behind (a delete takes them)",
        (
            Edit(
                function("jobs_partition_drop"),
                "            execute format('delete from tickq.job_signals s using tickq.%I j'\n"
                "                           ' where s.job_id = j.id', p_name);\n",
                "",
            ),
        ),
        targeted=("tests/unit/test_job_tables.py",),
    ),
    Mutant(
        "forget-keeps-settlements",
        "a deleted parent's settlement stays behind (a dropped partition and TRUNCATE take it)",
        (
            Edit(
                function("jobs_forget"),
                "    delete from tickq.job_settlements x using gone g\n"
                "    where x.parent_id = g.id and g.has_children;  -- only a parent has one\n",
                "",
            ),
        ),
        targeted=("tests/unit/test_job_tables.py",),
    ),
    # One body per rule: the operator's entry points wrap the store's.
    Mutant(
        "search-ignores-groups",
        "the one job search (a user's and the operator's list) ignores the group filter",
        (
            Edit(
                function("jobs_search"),
                "  and (p_groups is null or j.group_key = any(p_groups))\n",
                "",
            ),
        ),
        targeted=("tests/integration/test_console.py::test_the_lists_filter_by_fairness_group",),
    ),
    Mutant(
        "abandoned-handlers-never-bound-claims",
        "a runner claims on however many handler threads it abandoned at their timeout: a"
        " worker never exits to be rid of them, a tick keeps claiming",
        (
            Edit(
                "queue_core/runner/timeouts.py",
                "        return bound is not None and len(self._threads) > bound"
                " and self.running > bound\n",
                "        return False\n",
            ),
        ),
        targeted=(
            ABANDONED_BOUND,
            "tests/functions/test_tick.py::"
            "test_a_tick_whose_abandoned_handlers_pass_the_bound_claims_no_more",
        ),
    ),
    Mutant(
        "abandoned-bound-lets-the-persist-claim",
        "past the abandoned bound the loop stops, but the statement persisting the batch still"
        " leases the next one, which then runs",
        (
            Edit(
                RUNNER,
                "claimed = self.run_batch(report, claim_next=go_on, overlap=True)",
                "claimed = self.run_batch(report, claim_next=rule.go_on, overlap=True)",
            ),
        ),
        targeted=(
            ABANDONED_BOUND,
            "tests/functions/test_tick.py::"
            "test_a_tick_whose_abandoned_handlers_pass_the_bound_claims_no_more",
        ),
    ),
    Mutant(
        "job-views-hide-how-a-timeout-stopped",
        "tickq show and the API's job view leave out how a timed-out attempt was stopped",
        (
            Edit(
                "queue_core/model/jobs.py",
                '        out["timed_out"] = timed_out_view(self.error)\n',
                '        out["timed_out"] = None\n',
            ),
        ),
        targeted=(
            f"{TIMEOUT_VIEWS}::test_show_prints_the_timeout_and_how_the_attempt_was_stopped",
            "tests/functions/test_api.py::"
            "test_the_job_view_says_how_a_timed_out_attempt_was_stopped",
        ),
    ),
    Mutant(
        "operator-view-hides-how-a-timeout-stopped",
        "the operator console's job view leaves out how a timed-out attempt was stopped",
        (
            Edit(
                "queue_core/console/jobs.py",
                '            "timed_out": timed_out_view(job["error"]),\n',
                '            "timed_out": None,\n',
            ),
        ),
        targeted=(
            f"{TIMEOUT_VIEWS}::"
            "test_the_operator_job_view_shows_the_timeout_and_how_the_attempt_was_stopped",
        ),
    ),
    Mutant(
        "suspended-jobs-counted-as-depth",
        "a suspended job (queued with its wait) counts as runnable queue depth: the depth"
        " metric, its alarms and the console's chart count jobs no worker may claim",
        (
            Edit(
                "queue_core/store/port.py",
                "        return self.count - self.suspended - self.flow_held\n",
                "        return self.count - self.flow_held\n",
            ),
        ),
        targeted=(f"{SUSPENDED_SHOWN}::test_a_suspended_job_is_not_runnable_depth",),
    ),
    Mutant(
        "suspended-jobs-shown-queued",
        "the CLI and the API show a suspended job as queued, like a job a worker may claim",
        (
            Edit(
                "queue_core/model/jobs.py",
                '        return "suspended" if self.is_suspended else self.status.value\n',
                "        return self.status.value\n",
            ),
        ),
        targeted=(
            f"{SUSPENDED_SHOWN}::test_a_suspended_job_shows_suspended_and_a_queued_one_queued",
            f"{SUSPENDED_SHOWN}::test_the_cli_lists_and_shows_a_suspended_job_as_suspended",
        ),
    ),
    Mutant(
        "flow-cap-counted-per-prefix",
        "a flow cap counts the running jobs of every key of the governing prefix, not of each"
        " key: one busy key holds back all the others",
        (
            Edit(
                function("flow_admit"),
                "where j.status = 'running' and j.flow_keys @> array[k.key]) r on true",
                "where j.status = 'running' and exists (\n"
                "                           select from unnest(j.flow_keys) x\n"
                "                           where starts_with(x, (select g.prefix\n"
                "                               from tickq.flow_limit_of(k.key) g)))) r on true",
            ),
        ),
        targeted=(
            f"{FLOW_TESTS}::test_a_running_job_of_one_key_holds_back_no_other_key_of_its_prefix",
            FLOW_MODEL,
        ),
    ),
    Mutant(
        "flow-rate-window-off-by-one",
        "a start exactly one period ago still counts against a key's rate: the window is one"
        " instant too long, and a key runs below its rate",
        (
            Edit(
                function("flow_admit"),
                "and f.at > p_now - k.period * interval '1 second') s on true",
                "and f.at >= p_now - k.period * interval '1 second') s on true",
            ),
        ),
        targeted=(
            f"{FLOW_TESTS}::test_every_claim_variant_keeps_each_key_within_its_rate",
            FLOW_MODEL,
        ),
    ),
    Mutant(
        "flow-hold-ignored-by-the-fair-claim",
        "the fair claim applies flow keys only while a flow limit exists: a key held without"
        " one starts anyway when fairness is in play",
        (
            Edit(
                function("claim_fair"),
                "    v_flowing := exists (select from tickq.flow_limits)\n"
                "                 or exists (select from tickq.flow_holds h"
                " where h.until > v_now);",
                "    v_flowing := exists (select from tickq.flow_limits);",
            ),
        ),
        targeted=(f"{FLOW_TESTS}::test_every_claim_variant_honours_a_hold",),
    ),
    Mutant(
        "outside-callers-flow-key-unprefixed",
        "an application user's flow key is stored as given: a tenant can hold back another's"
        " work by naming its key",
        (
            Edit(
                function("enqueue_job"),
                "select case when p_owner is null then e else p_owner::text || '/' || e end",
                "select e",
            ),
        ),
        targeted=(
            f"{FLOW_TESTS}::test_an_outside_callers_keys_are_stored_under_its_owner",
            "tests/functions/test_flow_key_functions.py::"
            "test_the_api_stores_a_callers_keys_under_the_caller",
        ),
    ),
    Mutant(
        "stream-claims-only-when-all-ended",
        "the streaming loop claims only once every job in hand has ended: a slot freed by a"
        " quick job stays idle while a slow one runs",
        (Edit(STREAM, "        if room <= 0:\n", "        if room <= 0 or self.in_hand:\n"),),
        targeted=(
            f"{STREAM_TESTS}::test_a_tick_runs_the_backlog_in_the_slot_a_slow_job_leaves_free",
            f"{STREAM_TESTS}::test_a_worker_runs_the_backlog_in_the_slot_a_slow_job_leaves_free",
        ),
    ),
    Mutant(
        "stream-saves-only-when-all-ended",
        "while no claim goes out, an ended job's outcome waits until no job is in hand: a"
        " quick job's outcome waits for its slow neighbour, its lease running down",
        (
            Edit(
                STREAM,
                "        now = time.monotonic()\n        ended, batch = len(self.jobs),"
                " self.runner.batch_size\n",
                "        return False\n",
            ),
        ),
        targeted=(
            "tests/integration/test_runner_ended_leases.py::"
            "test_a_quick_job_beside_a_slow_one_is_saved_at_once_and_never_run_twice[streaming]",
        ),
    ),
    Mutant(
        "stream-runs-long-waiting-jobs-unrenewed",
        "a job claimed ahead that waited past a third of its lease starts without renewing it,"
        " and runs even when its lease was lost meanwhile",
        (
            Edit(
                STREAM,
                "            if started - call.claimed_at"
                " > self.runner.shortest_lease(call.jobs) / 3:\n",
                "            if False:\n",
            ),
        ),
        targeted=(
            f"{STREAM_TESTS}::test_a_job_that_waited_long_for_a_handler_has_its_lease_renewed_first",
        ),
    ),
    Mutant(
        "plain-claim-unguarded",
        "the plain claim picks jobs whatever limits or holds exist: a limit set by another"
        " process is ignored by a running worker until its probe looks again, 5 s later",
        (
            Edit(
                QUERIES,
                "      and not (select limited from guard)\n",
                "",
            ),
        ),
        targeted=(
            f"{FLOW_TESTS}::test_a_limit_set_by_another_process_holds_at_the_very_next_claim",
            f"{FLOW_TESTS}::test_a_hold_set_by_another_process_holds_at_the_very_next_claim",
        ),
    ),
    Mutant(
        "flow-held-jobs-counted-as-depth",
        "jobs only their flow key holds back (held, at its cap) count as depth and in the"
        " oldest runnable age: the alarm fires for waiting an operator or a downstream asked for",
        (
            Edit(
                "queue_core/postgres/reads.py",
                "        if not held:\n            return rows\n",
                "        if held or not held:\n            return rows\n",
            ),
        ),
        targeted=(
            "tests/functions/test_maintenance.py::"
            "test_jobs_only_a_flow_key_holds_back_are_no_depth_and_no_oldest_age",
        ),
    ),
)
