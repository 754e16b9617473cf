"""The runner: the claim -> run -> persist loop (`Runner`), running handlers and stopping them
at their timeouts, the worker's stop rule, the pipeline, the handler's context and its
durable steps, the task registry. It knows the store port alone, never PostgreSQL.
"""
