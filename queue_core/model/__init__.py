"""Values and pure rules: jobs, requests, the state machine, steps, workflows, dependencies,
gates, fairness. No I/O and no clock: every rule that needs the time takes `now`.
"""
