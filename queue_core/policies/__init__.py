"""Standing policies, each with its table: cron schedules, limits, retention, partitions of
finished jobs, queue pauses and the outbox of lifecycle events.
"""
