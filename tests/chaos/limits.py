"""Numbers the soak's handlers and its supervisor share. Kept apart from chaos_tasks, whose
import registers handlers on the process-wide registry: only worker processes import it."""

from __future__ import annotations

LEASE_SECONDS = 2
MAX_ATTEMPTS = 4
CRASH_EXIT_CODE = 86
