"""Numbers the soak's handlers and its supervisor share. Kept apart from chaos_tasks, whose
import registers handlers on the process-wide registry: only worker processes import it."""

from __future__ import annotations

LEASE_SECONDS = 2
MAX_ATTEMPTS = 4
# A short cap: the second retry's raw delay (0.3 * 4 = 1.2 s) is above it, so a backoff
# that skips the cap shows in the retries' run_after.
BACKOFF = {"base": 0.3, "factor": 4, "max": 0.5, "jitter": 0.2}
# Handlers that hang (chaos_tasks.chaos_hang): stopped at this timeout, else they would
# heartbeat for HANG_SECONDS; a worker reclaims expired leases this often (Runner.work's
# default), so no job of theirs may stay running past the timeout plus that interval.
HANG_TIMEOUT_SECONDS = 1
HANG_SECONDS = 30.0
RECLAIM_INTERVAL_SECONDS = 5.0
CRASH_EXIT_CODE = 86
EVIDENCE_LOST_EXIT_CODE = 87
# Durable-steps jobs: every killed or crashed execution counts an attempt, and a job of
# several steps meets several of them.
STEP_MAX_ATTEMPTS = 25
# Their retries wait at most half a second: the soak enqueues with this policy too, so no
# job sits out the drain behind the default backoff's minutes-long cap.
STEP_BACKOFF = {"base": 0.1, "factor": 2, "max": 0.5}
# The workflows soak's saga (tests/chaos/workflow_tasks.py): children per map step, and the
# error its last step fails with for good. Here, not in the tasks module, so the test
# process can read them without registering the soak's handlers in the default registry
# (which would refuse every other test's job types).
WORKFLOW_CHILDREN = 4
WORKFLOW_FAILURE = "the saga's last step fails for good"
