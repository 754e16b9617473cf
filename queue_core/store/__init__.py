"""The store port (the Protocols the runner and the shells use), the operations every store
derives from its one statement, and the in-memory store for fast tests of what sits on it.
"""
